// Package buildinfo says which build of tmend is running: its version, commit, date, Go
// version and whether its source tree had uncommitted changes.
//
// What the Go toolchain records is the default: the module version when built with
// `go install github.com/tmend/tmend/cmd/tmend@vX` (a release tag or a pseudo-version,
// which carries the commit and its time), and the vcs.revision, vcs.time and
// vcs.modified settings when built from a checkout. Release builds stamp the fields
// instead, and a stamped field wins:
//
//	go build -ldflags "-X github.com/tmend/tmend/cmd/tmend/buildinfo.version=v1.2.3
//	  -X github.com/tmend/tmend/cmd/tmend/buildinfo.commit=$(git rev-parse HEAD)
//	  -X github.com/tmend/tmend/cmd/tmend/buildinfo.date=$(git log -1 --format=%cI)
//	  -X github.com/tmend/tmend/cmd/tmend/buildinfo.modified=false" ./cmd/tmend
//
// (The Makefile, deploy/Dockerfile and .goreleaser.yaml do this.)
package buildinfo

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// Stamped with -ldflags "-X github.com/tmend/tmend/cmd/tmend/buildinfo.NAME=VALUE".
// Empty means not stamped. modified is "true" or "false".
var (
	version  string
	commit   string
	date     string
	modified string
)

// Info describes a build. Fields that nothing recorded are empty (Version is then "dev").
type Info struct {
	Version   string `json:"version"`    // v1.2.3, a pseudo-version, or "dev"
	Commit    string `json:"commit"`     // the full revision, or the 12-digit prefix a pseudo-version carries
	Date      string `json:"date"`       // RFC 3339: the stamped date, else the commit's time
	GoVersion string `json:"go_version"` // the toolchain that built it
	Modified  bool   `json:"modified"`   // built from a tree with uncommitted changes
}

// Get returns the running binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo() // nil in binaries built without module support
	return fromBuild(bi, stamp{version: version, commit: commit, date: date, modified: modified})
}

// stamp holds the -X stamped values.
type stamp struct{ version, commit, date, modified string }

// fromBuild combines what the toolchain recorded (bi may be nil) with the stamped values.
func fromBuild(bi *debug.BuildInfo, s stamp) Info {
	info := Info{Version: "dev", GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
			// go install ...@<branch or commit> and, since Go 1.24, builds from a checkout
			// without a tag on HEAD record a pseudo-version: it names the commit and its time.
			if m := pseudoVersion.FindStringSubmatch(v); m != nil {
				info.Commit = m[2]
				if t, err := time.Parse("20060102150405", m[1]); err == nil {
					info.Date = t.UTC().Format(time.RFC3339)
				}
			}
			info.Modified = strings.HasSuffix(v, "+dirty")
		}
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				info.Commit = kv.Value
			case "vcs.time":
				info.Date = kv.Value
			case "vcs.modified":
				info.Modified = kv.Value == "true"
			}
		}
	}
	if s.version != "" {
		info.Version = s.version
	}
	if s.commit != "" {
		info.Commit = s.commit
	}
	if s.date != "" {
		info.Date = s.date
	}
	if b, err := strconv.ParseBool(s.modified); err == nil {
		info.Modified = b
	}
	return info
}

// pseudoVersion matches the end of a Go pseudo-version (vX.Y.Z-yyyymmddhhmmss-abcdefabcdef,
// or with .yyyymmddhhmmss- after a pre-release), with the suffixes the toolchain adds.
var pseudoVersion = regexp.MustCompile(`[-.](\d{14})-([0-9a-f]{12})(\+incompatible)?(\+dirty)?$`)

// String is one line for `tmend version`: "v1.2.3 (commit 0123456789ab, 2026-01-02T03:04:05Z,
// go1.26.0)", with ", modified" when the tree had uncommitted changes.
func (i Info) String() string {
	var parts []string
	if i.Commit != "" {
		c := i.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		parts = append(parts, "commit "+c)
	}
	if i.Date != "" {
		parts = append(parts, i.Date)
	}
	parts = append(parts, i.GoVersion)
	if i.Modified {
		parts = append(parts, "modified")
	}
	return fmt.Sprintf("%s (%s)", i.Version, strings.Join(parts, ", "))
}
