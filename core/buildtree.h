/* SPDX-License-Identifier: Apache-2.0
 *
 * Included into every core file by core/meson.build (-include), with
 * ADR_BUILD_ROOT defined as adr__build_root(): the loader's build-tree
 * fallback (core/loader.c) asks for the build root at run time instead of
 * compiling its absolute path into the library, so the installed library
 * does not carry the build directory (reproducible builds, issue 13).
 */
#ifndef ADR_CORE_BUILDTREE_H
#define ADR_CORE_BUILDTREE_H

/* The meson build directory adr runs from, or "" when it runs installed:
 * the nearest ancestor of the directory holding the core's code (libadr.so,
 * or the test program that links the core statically) that contains the
 * marker file `adr-build-tree` written by the top-level meson.build, if that
 * marker is trusted (owned by the code's owner or root, in a directory that
 * is not world-writable; the nearest marker decides either way). Found
 * once; "" in elevated processes (AT_SECURE), where no file outside the
 * installation decides what is loaded. Thread-safe (pthread_once). */
const char* adr__build_root(void);

#endif
