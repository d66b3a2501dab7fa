//go:build !unix

package kits

const syscallNoFollow = 0
