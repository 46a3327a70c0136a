package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mcptape/mcptape/cmd/mcptape/internal/ca"
)

const caUsage = "init [--force] | path  [--data DIR]"

// caDir is the CA's folder in a data directory.
func caDir(data string) string { return filepath.Join(data, "ca") }

func runCA(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("say which: `mcptape ca init` (create mcptape's CA) or `mcptape ca path` (print its certificate's path)")
	}
	if isHelp(args[0]) {
		return groupHelp(stderr, "ca", "init", "path")
	}
	switch args[0] {
	case "init", "path":
	default:
		return usagef("unknown ca command %q: want init or path%s", args[0], didYouMean(args[0], "init", "path"))
	}
	fs := newFlags("ca "+args[0], stderr)
	data := fs.String("data", defaultDataDir(), "the data directory; the CA lives in its ca folder")
	force := false
	if args[0] == "init" {
		fs.BoolVar(&force, "force", false, "replace an existing CA (clients that trusted the old one must be told to trust the new one)")
	}
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	dir := caDir(*data)
	if args[0] == "path" {
		if _, err := os.Stat(ca.CertPath(dir)); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no CA in %s yet: create one with `mcptape ca init --data %s`", dir, *data)
		}
		fmt.Fprintln(stdout, ca.CertPath(dir))
		return nil
	}
	path, err := ca.Init(dir, &ca.Options{Force: force})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "mcptape: wrote the CA certificate to %s\n", path)
	fmt.Fprintf(stdout, "mcptape: its private key is %s, readable by you alone; it never needs to leave this machine\n", ca.KeyPath(dir))
	fmt.Fprintf(stdout, "mcptape: to let a client trust it (see \"mcptape's own CA\" in docs/recording.md): Node NODE_EXTRA_CA_CERTS=%s; curl --cacert %s;\n", path, path)
	fmt.Fprintf(stdout, "mcptape: Python and Go read a whole bundle from SSL_CERT_FILE (requests: REQUESTS_CA_BUNDLE): give them the system's CAs plus this one\n")
	return nil
}
