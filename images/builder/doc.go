// Package builder builds the local images into an image store (package images): the test and
// demo images — a busybox controller, the scripted demo's controller, a python image made with
// debootstrap from Debian's packages (numpy, torch) — and each shipped agent's controller image
// from its scaffolds directory (its npm tarballs, pinned by SHA-256, over a debootstrap of its
// base's packages). Each build is keyed by its inputs and recipe version and cached in the build
// cache, so a second build of unchanged inputs takes seconds; long steps print progress.
package builder
