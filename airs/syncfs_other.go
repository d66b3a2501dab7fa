//go:build !linux

package airs

import (
	"os"

	"github.com/sealrun/sealrun/internal/fileio"
)

// syncFS fsyncs every file and directory under path (no syncfs(2) here).
func syncFS(path string) error { return fileio.SyncTree(path) }

func startWriteback(*os.File) {}
