// Package sandbox owns the Linux primitives around every container of a run: OCI runtime specs
// for the controller, runner and grader profiles, the runtime driver, cgroups, network namespaces
// and veth pairs, the air-gap probe and its evidence, and reaping of leftovers.
package sandbox
