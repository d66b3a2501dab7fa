package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newDocsCmd writes the CLI reference from the commands themselves (make docs: docs/cli, checked
// in and compared with a fresh one by TestCLIReferenceIsGenerated; make install: man pages).
func newDocsCmd(root func() *cobra.Command) *cobra.Command {
	var markdown, man string
	cmd := &cobra.Command{
		Use:    "docs --markdown DIR | --man DIR",
		Short:  "Write the CLI reference (Markdown) or man pages from the commands themselves",
		Hidden: true,
		Args:   exactArgs(0, "no arguments (use the flags)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if markdown == "" && man == "" {
				return usage(errors.New("give --markdown DIR, --man DIR or both"))
			}
			if markdown != "" {
				if err := writeMarkdownReference(root(), markdown); err != nil {
					return err
				}
			}
			if man != "" {
				if err := os.MkdirAll(man, 0o755); err != nil {
					return err
				}
				r := root()
				r.DisableAutoGenTag = true
				hdr := &doc.GenManHeader{Title: "SEALRUN", Section: "1", Source: "sealrun", Manual: "sealrun manual"}
				if err := doc.GenManTree(r, hdr, man); err != nil {
					return fmt.Errorf("man pages into %s: %w", man, err)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&markdown, "markdown", "", "directory to write one Markdown page per command into (its old pages are replaced)")
	cmd.Flags().StringVar(&man, "man", "", "directory to write one man page (section 1) per command into")
	return cmd
}

// writeMarkdownReference writes one page per command into dir, replacing the pages there: the
// same commands always give the same bytes (no date stamp).
func writeMarkdownReference(r *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "sealrun*.md"))
	for _, o := range old {
		os.Remove(o)
	}
	r.DisableAutoGenTag = true
	link := func(name string) string { return strings.TrimSuffix(name, ".md") + ".md" }
	prepend := func(string) string { return "" }
	if err := doc.GenMarkdownTreeCustom(r, dir, prepend, link); err != nil {
		return fmt.Errorf("the CLI reference into %s: %w", dir, err)
	}
	return nil
}
