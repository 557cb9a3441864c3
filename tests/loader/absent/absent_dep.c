/* SPDX-License-Identifier: Apache-2.0
 * A library that exists only at link time: the t_dep test plugin records it
 * as a dependency, and it is not on any run-time search path. */
int adr_test_absent_dep(void);
int adr_test_absent_dep(void) {
  return 42;
}
