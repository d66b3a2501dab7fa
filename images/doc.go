// Package images owns container images: pinning references by digest, pulling or importing
// (registry, OCI layout, docker-archive tarball), verifying every blob, unpacking layers safely into
// a content-addressed store, and building the local demo and test images.
package images
