package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// linkRE finds Markdown links and images: [text](target).
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// headingRE finds ATX headings.
var headingRE = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)

// anchors returns the GitHub anchors of a page's headings (outside code
// blocks): lower case, punctuation other than - and _ dropped, spaces as -.
func anchors(t *testing.T, page string) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(stripBlocks(string(src)), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(m[1])) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// stripBlocks blanks the fenced blocks of a page, whose # lines and
// brackets are code.
func stripBlocks(src string) string {
	var out []string
	in := false
	for _, line := range strings.Split(src, "\n") {
		if fenceRE.MatchString(line) {
			in = !in
			out = append(out, "")
			continue
		}
		if in {
			line = ""
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// TestDocsLinks checks that every relative link of README.md and docs/*.md
// names a file of the repository and, with #anchor, a heading of a page.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	n := 0
	for _, page := range pages(t) {
		src, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		text := stripBlocks(string(src))
		// Inline code is not a link either.
		text = regexp.MustCompile("`[^`\n]*`").ReplaceAllString(text, "")
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = path.Clean(path.Join(path.Dir(page), file))
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s: the link %s names no file (%s)", page, target, dest)
					continue
				}
			}
			if anchor != "" {
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: the link %s has an anchor in a file that is not a page", page, target)
				} else if !anchors(t, dest)[anchor] {
					t.Errorf("%s: the link %s names no heading of %s", page, target, dest)
				}
			}
		}
	}
	t.Logf("%d relative links", n)
}
