// Package images owns container images: pinning references by digest, pulling or importing
// (registry, OCI layout, docker-archive tarball), verifying every blob, unpacking layers safely into
// a content-addressed store, pushing, and making an image from a directory. Building the local
// demo and test images is images/builder's.
package images
