// Package sandbox owns the Linux primitives around every container of a run: OCI runtime specs
// for the controller, runner and grader profiles, the runtime driver, network namespaces and
// veth pairs, the air-gap probe and its evidence, and reaping of leftovers. Its cgroups (where
// they go, their life, the device filter) are sandbox/cgroup's, which it composes.
package sandbox
