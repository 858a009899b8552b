package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/gridwire/gridwire/pkg/classad"
	"github.com/spf13/cobra"
)

// globusURLCopy is the one tool transfer-plugin drives: GridFTP's client.
const globusURLCopy = "globus-url-copy"

// globusMethods are the schemes globus-url-copy moves that the stager has no code for.
const globusMethods = "gsiftp,ftp,sshftp"

// transferPluginCmd is a stager transfer plugin (the contract in docs/staging.md, in
// the manner of HTCondor's multi-file plugins) that moves each file with
// globus-url-copy. Its arguments are the plugin contract's single-dash ones, so cobra
// does not parse them.
func transferPluginCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "transfer-plugin globus-url-copy (-classad | -infile IN -outfile OUT [-upload])",
		Short: "a stager transfer plugin for GridFTP (gsiftp://, ftp://, sshftp://) through globus-url-copy",
		Long: "transfer-plugin is the command an operator names in stager.plugins to move gsiftp://, ftp:// and sshftp:// " +
			"URLs with globus-url-copy, which must be on PATH. It speaks the stager's plugin contract: -classad says what " +
			"it serves; -infile/-outfile move the files listed and write one result ClassAd each.",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
				return cmd.Help()
			}
			return runTransferPlugin(cmd.Context(), args, e.stdout)
		},
	}
}

func runTransferPlugin(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != globusURLCopy {
		return usageErrorf("transfer-plugin: the first argument names the tool; only %s is known", globusURLCopy)
	}
	args = args[1:]
	if len(args) == 1 && args[0] == "-classad" {
		ad := classad.Ad{{Name: "MultipleFileSupport", Value: true}, {Name: "PluginVersion", Value: "1"},
			{Name: "PluginType", Value: "FileTransfer"}, {Name: "SupportedMethods", Value: globusMethods}}
		_, err := fmt.Fprintln(stdout, ad.Format())
		return err
	}
	var in, out string
	upload := false
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-upload":
			upload = true
		case args[i] == "-infile" && i+1 < len(args):
			i++
			in = args[i]
		case args[i] == "-outfile" && i+1 < len(args):
			i++
			out = args[i]
		default:
			return usageErrorf("transfer-plugin: unknown argument %q", args[i])
		}
	}
	if in == "" || out == "" {
		return usageErrorf("transfer-plugin: want -classad, or -infile IN -outfile OUT [-upload]")
	}
	return transferAll(ctx, in, out, upload)
}

// transferAll moves every file the infile lists and writes a result for each.
func transferAll(ctx context.Context, in, out string, upload bool) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	ads, err := classad.Parse(data)
	if err != nil {
		return fmt.Errorf("transfer-plugin: %s: %w", in, err)
	}
	var results bytes.Buffer
	failed := 0
	for _, ad := range ads {
		res := transferOne(ctx, ad, upload)
		if ok, _ := res.Bool("TransferSuccess"); !ok {
			failed++
		}
		results.WriteString(res.Format() + "\n")
	}
	if err := os.WriteFile(out, results.Bytes(), 0o600); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("transfer-plugin: %d of %d transfers failed", failed, len(ads))
	}
	return nil
}

// ftpPermanent finds an FTP 5yz reply, a permanent negative completion (RFC 959).
var ftpPermanent = regexp.MustCompile(`(?m)^\s*5\d\d[ -]`)

// transferOne runs globus-url-copy for one ClassAd and describes the outcome.
func transferOne(ctx context.Context, ad classad.Ad, upload bool) classad.Ad {
	rawURL, _ := ad.String("Url")
	local, _ := ad.String("LocalFileName")
	kind := "download"
	if upload {
		kind = "upload"
	}
	res := classad.Ad{{Name: "TransferUrl", Value: rawURL}, {Name: "TransferFileName", Value: filepath.Base(local)},
		{Name: "TransferType", Value: kind}, {Name: "TransferStartTime", Value: time.Now().Unix()}}
	fail := func(msg string, retryable bool) classad.Ad {
		return append(res, classad.Attr{Name: "TransferSuccess", Value: false},
			classad.Attr{Name: "TransferError", Value: msg}, classad.Attr{Name: "TransferRetryable", Value: retryable})
	}
	u, err := url.Parse(rawURL)
	if err != nil || !strings.Contains(","+globusMethods+",", ","+strings.ToLower(u.Scheme)+",") || u.Host == "" {
		return fail(fmt.Sprintf("%q is not a %s URL", rawURL, globusMethods), false)
	}
	if !filepath.IsAbs(local) {
		return fail(fmt.Sprintf("LocalFileName %q is not absolute", local), false)
	}
	res = append(res, classad.Attr{Name: "TransferProtocol", Value: strings.ToLower(u.Scheme)})
	src, dst := rawURL, "file://"+local
	if upload {
		src, dst = dst, src
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, globusURLCopy, src, dst)
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if errors.Is(err, exec.ErrNotFound) {
			msg = globusURLCopy + " is not installed (Debian: globus-gass-copy-progs)"
		}
		return fail(fmt.Sprintf("%s: %v: %s", globusURLCopy, err, msg), !ftpPermanent.MatchString(msg))
	}
	size := int64(0)
	if fi, err := os.Stat(local); err == nil {
		size = fi.Size()
	}
	return append(res, classad.Attr{Name: "TransferSuccess", Value: true}, classad.Attr{Name: "TransferTotalBytes", Value: size},
		classad.Attr{Name: "TransferEndTime", Value: time.Now().Unix()})
}
