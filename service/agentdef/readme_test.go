package agentdef

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// promptBlock is a fenced block of the README that holds a whole .prompt
// file: front matter first.
var promptBlock = regexp.MustCompile("(?s)```(?:yaml|prompt)\n(---\n.*?\n---\n.*?)```")

// TestReadmePromptsParse parses every .prompt file the README and docs/
// show, as `platform agents apply` would (one's front matter once failed as
// YAML).
func TestReadmePromptsParse(t *testing.T) {
	t.Parallel()
	pages, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	var blocks [][][]byte
	for _, page := range append([]string{filepath.Join("..", "..", "README.md")}, pages...) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, promptBlock.FindAllSubmatch(b, -1)...)
	}
	if len(blocks) == 0 {
		t.Fatal("the README shows no .prompt file")
	}
	for _, m := range blocks {
		d, err := Parse(m[1])
		if err != nil {
			t.Errorf("a .prompt block of the README does not parse: %v\n%s", err, m[1])
			continue
		}
		if d.Name == "" {
			t.Errorf("a .prompt block of the README names no agent:\n%s", m[1])
		}
	}
	t.Logf("%d .prompt blocks parsed", len(blocks))
}
