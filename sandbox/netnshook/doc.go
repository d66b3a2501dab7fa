// Package netnshook is the createRuntime hook of sealrun containers, kept small so that its
// binary (cmd/sealrun-netns-hook) starts fast at every container start. Between the runtime's
// creation of a container's namespaces and the start of its process, it configures the
// container's network namespace for its role (loopback up, IPv6 off, and for the controller a
// veth /30 to the run's gateway netns), tightens the device cgroup, reads the namespace back with
// netlink, records that air-gap evidence, and refuses the start unless it is exactly what the
// role allows. The evidence's format and the rule are package airgap's, which a verifier uses
// on any machine; this package imports no other of sealrun's.
package netnshook
