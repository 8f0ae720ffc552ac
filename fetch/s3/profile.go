package s3

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/ini.v1"
)

// The shared files' nested "s3" settings (botocore's, the AWS CLI's):
//
//	[profile dev]
//	s3 =
//	    addressing_style = path
//
// aws-sdk-go-v2 reads the shared files with its own INI parser, which is
// internal to its config module (not importable) and keeps nested values
// only for "services" sections; its SharedConfig has no addressing style.
// So the files are read here once more, with gopkg.in/ini.v1 (go-ini: the
// well-kept Go INI library; its Python multi-line values are configparser's
// continuation lines), and the nested value is parsed as botocore parses
// it (parseNested).

// profileStyle is the addressing_style of the "s3" settings of profile
// (AWS_PROFILE, else "default") in the shared config file and, merged over
// it as botocore merges them, the shared credentials file: "" when neither
// sets one; a value other than auto, path or virtual is an error naming
// the file and the profile. Missing files are no error.
func profileStyle(configFile, credsFile, profile string) (string, error) {
	if profile == "" {
		profile = "default"
	}
	style, where := "", ""
	for _, f := range []struct {
		path   string
		config bool // sections are "profile NAME" (and "default")
	}{{configFile, true}, {credsFile, false}} {
		s3, ok, err := profileS3(f.path, profile, f.config)
		if err != nil {
			return "", err
		}
		if ok { // the profile's s3 value replaces the earlier file's whole
			style, where = s3["addressing_style"], f.path
		}
	}
	switch strings.ToLower(style) {
	case "", StyleAuto, StylePath, StyleVirtual:
		return strings.ToLower(style), nil
	}
	return "", fmt.Errorf("%s, profile %s: s3 addressing_style %q: want auto, path or virtual", where, profile, style)
}

// profileS3 returns the nested s3 settings of profile in the shared file
// p (ok false when the file, the profile or its s3 key is absent).
func profileS3(p, profile string, config bool) (map[string]string, bool, error) {
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) || p == "" {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("aws shared file: %w", err)
	}
	f, err := ini.LoadSources(ini.LoadOptions{
		AllowPythonMultilineValues: true, // nested values are continuation lines
		IgnoreInlineComment:        true, // as configparser: "#" only starts a comment line
		InsensitiveKeys:            true, // configparser lower-cases option names
		AllowNonUniqueSections:     false,
	}, b)
	if err != nil {
		// go-ini's error quotes the line: the file may hold keys.
		return nil, false, fmt.Errorf("aws shared file %s: not an INI file (a line is neither a [section], key = value, an indented continuation nor a comment)", p)
	}
	var sec *ini.Section
	for _, s := range f.Sections() { // a later section of the profile wins, as in botocore
		if sectionProfile(s.Name(), config) == profile {
			sec = s
		}
	}
	if sec == nil || !sec.HasKey("s3") {
		return nil, false, nil
	}
	m, err := parseNested(sec.Key("s3").Value())
	if err != nil {
		return nil, false, fmt.Errorf("aws shared file %s, profile %s: s3: %w", p, profile, err)
	}
	return m, true, nil
}

// sectionProfile is the profile a section names: in the config file
// "profile NAME" (any spaces between) or "default"; in the credentials
// file the section's name. "" for other sections.
func sectionProfile(name string, config bool) string {
	if !config {
		return strings.TrimSpace(name)
	}
	if name == "default" {
		return name
	}
	if f := strings.Fields(name); len(f) == 2 && f[0] == "profile" {
		return f[1]
	}
	return ""
}

// parseNested parses a nested value as botocore does: one "key = value"
// per non-blank line, both trimmed; a line without "=" is an error. A
// value that does not start on the next line (s3 = path) is not nested.
func parseNested(v string) (map[string]string, error) {
	if !strings.HasPrefix(v, "\n") {
		if strings.TrimSpace(v) == "" {
			return map[string]string{}, nil
		}
		return nil, errors.New("not a nested section (the settings go on the following, indented lines)")
	}
	m := map[string]string{}
	for _, line := range strings.Split(v, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, val, ok := strings.Cut(line, "=")
		if !ok { // the line is not quoted: a shared file may hold keys
			return nil, errors.New("a line of the nested settings is not key = value")
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	return m, nil
}

// sharedFiles are the shared config and credentials files the AWS CLI
// reads: AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE, else
// ~/.aws/config and ~/.aws/credentials.
func sharedFiles(o *Options, getenv func(string) string) (config, creds string) {
	config, creds = o.ConfigFile, o.CredentialsFile
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if config == "" && home != "" {
		config = filepath.Join(home, ".aws", "config")
	}
	if creds == "" && home != "" {
		creds = filepath.Join(home, ".aws", "credentials")
	}
	return config, creds
}
