//go:build !linux

package airs

import (
	"io/fs"
	"os"
	"path/filepath"
)

// syncFS fsyncs every file and directory under path (no syncfs(2) here).
func syncFS(path string) error {
	return filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}

func startWriteback(*os.File) {}
