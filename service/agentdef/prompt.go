package agentdef

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/dotprompt/go/dotprompt"
	"gopkg.in/yaml.v3"
)

// source is a .prompt file split into front matter and template.
type source struct {
	text     string // the whole file, ending with a newline
	open     int    // line of the opening ---
	yaml     string // the front matter
	yamlLine int    // line of the front matter's first line
	// lines maps the pathKey of each key and list item of the front
	// matter to its file line.
	lines map[string]int
}

// pathKey is the key of p in source.lines. YAML text cannot hold the
// control characters that separate its parts.
func pathKey(p path) string {
	var b strings.Builder
	for _, e := range p {
		switch e := e.(type) {
		case string:
			b.WriteByte(0)
			b.WriteString(e)
		case int:
			b.WriteByte(1)
			b.WriteString(strconv.Itoa(e))
		}
	}
	return b.String()
}

// split finds the front matter as dotprompt does.
func split(text string) (*source, error) {
	if !strings.HasSuffix(text, "\n") {
		// dotprompt wants a line break after the closing ---.
		text += "\n"
	}
	s := &source{text: text}
	if m := dotprompt.FrontmatterAndBodyRegex.FindStringSubmatchIndex(text); m != nil {
		s.yaml = text[m[2]:m[3]]
		s.yamlLine = lineAt(text, m[2])
	} else if dotprompt.EmptyFrontmatterRegex.MatchString(text) {
		s.yamlLine = 1
	} else {
		return nil, &Error{Line: 1, Message: "missing front matter: a .prompt file starts with a --- line, the YAML front matter (model: at least), and a closing --- line"}
	}
	// The opening --- follows blank lines and # comments only.
	s.open = 1
	for line := range strings.Lines(text) {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(line, "#") {
			break
		}
		s.open++
	}
	return s, nil
}

// lineAt is the 1-based line of the byte at off.
func lineAt(text string, off int) int {
	return 1 + strings.Count(text[:off], "\n")
}

func parsePrompt(text string) (*Definition, error) {
	src, err := split(text)
	if err != nil {
		return nil, err
	}
	root, err := src.yamlRoot()
	if err != nil {
		return nil, err
	}
	var parsed dotprompt.ParsedPrompt
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = &Error{Line: src.yamlLine, Message: fmt.Sprintf("the front matter cannot be read: %v", r)}
			}
		}()
		parsed, err = dotprompt.ParseDocument(src.text)
	}()
	if err != nil {
		return nil, asError(err, src.yamlLine, "")
	}
	if parsed.Raw == nil && root != nil && len(root.Content) > 0 {
		// dotprompt reads the front matter with another YAML library,
		// which refused what yaml.v3 accepted.
		return nil, &Error{Line: src.yamlLine, Message: "the front matter is YAML that dotprompt cannot read"}
	}
	meta, bad, err := normalize(parsed.Raw, nil)
	if err != nil {
		return nil, &Error{Line: src.line(bad), Field: bad.String(), Message: err.Error()}
	}
	m, _ := meta.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	b := &builder{lines: src.line}
	d, err := b.definition(m, promptForm)
	if err != nil {
		return nil, err
	}
	tplLine := src.templateLine(parsed.Template)
	if d.System, err = render(src.text, parsed.Template, tplLine); err != nil {
		return nil, err
	}
	return d, nil
}

// templateLine is the line where the (trimmed) template starts.
func (s *source) templateLine(tpl string) int {
	if tpl == "" {
		return 0
	}
	i := strings.LastIndex(s.text, tpl)
	if i < 0 {
		return 0
	}
	return lineAt(s.text, i)
}

// yamlRoot parses the front matter with yaml.v3, for its lines, and refuses
// what this package does not read: several documents, aliases, keys that
// are not strings or repeat, deep nesting. It returns nil for an empty
// front matter.
func (s *source) yamlRoot() (*yaml.Node, error) {
	for i, r := range s.yaml {
		if !yamlChar(r) {
			return nil, &Error{Line: lineAt(s.yaml, i) + s.yamlLine - 1, Message: fmt.Sprintf("the front matter holds the character %U, which YAML does not allow", r)}
		}
	}
	dec := yaml.NewDecoder(strings.NewReader(s.yaml))
	var doc yaml.Node
	if err := dec.Decode(&doc); err == io.EOF {
		return nil, nil
	} else if err != nil {
		return nil, s.yamlError(err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, &Error{Line: s.yamlLine + next.Line - 1, Message: "the front matter must be a single YAML document"}
	} else if err != io.EOF {
		return nil, s.yamlError(err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &Error{Line: s.yamlLine + root.Line - 1, Message: "the front matter must be a YAML mapping (key: value lines)"}
	}
	s.lines = map[string]int{}
	if err := s.checkNode(root, nil, 1); err != nil {
		return nil, err
	}
	return root, nil
}

// yamlChar says whether YAML allows r in a document.
func yamlChar(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r' || r == 0x85:
		return true
	case r >= 0x20 && r <= 0x7e, r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000 && r <= 0x10ffff:
		return true
	}
	return false
}

func (s *source) checkNode(n *yaml.Node, p path, depth int) error {
	at := s.yamlLine + n.Line - 1
	if l := s.lines[pathKey(p)]; len(p) > 0 && l > 0 {
		at = l // the line of its key or list item, as in other errors
	}
	entries := len(n.Content)
	if n.Kind == yaml.MappingNode {
		entries /= 2
	}
	if entries > maxEntries {
		return &Error{Line: at, Field: p.String(), Message: fmt.Sprintf("has more than %d entries", maxEntries)}
	}
	if depth > maxDepth {
		return &Error{Line: at, Field: p.String(), Message: fmt.Sprintf("nested more than %d deep", maxDepth)}
	}
	switch n.Kind {
	case yaml.AliasNode:
		return &Error{Line: at, Field: p.String(), Message: "YAML aliases (*name, <<) are not supported"}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			s.lines[pathKey(p.index(i))] = s.yamlLine + c.Line - 1
			if err := s.checkNode(c, p.index(i), depth+1); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		first := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kat := s.yamlLine + k.Line - 1
			if k.Kind == yaml.AliasNode {
				return &Error{Line: kat, Field: p.String(), Message: "YAML aliases (*name, <<) are not supported"}
			}
			if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
				return &Error{Line: kat, Field: p.String(), Message: "YAML merge keys (<<) are not supported"}
			}
			if k.Kind != yaml.ScalarNode {
				return &Error{Line: kat, Field: p.String(), Message: "mapping keys must be plain strings"}
			}
			if l, dup := first[k.Value]; dup {
				return &Error{Line: kat, Field: p.key(k.Value).String(), Message: fmt.Sprintf("repeats the key of line %d", l)}
			}
			first[k.Value] = kat
			s.lines[pathKey(p.key(k.Value))] = kat
			if err := s.checkNode(v, p.key(k.Value), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// yamlErrorRE matches yaml.v3's errors.
var yamlErrorRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// yamlParserProblems are yaml.v3's parser errors, whose line numbers count
// from 0 (its scanner errors count from 1).
var yamlParserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// yamlError turns a yaml.v3 error into an Error on the line it names (on
// the first line when it names none: yaml.v3 leaves out line 1).
func (s *source) yamlError(err error) *Error {
	msg := oneLine(err.Error())
	m := yamlErrorRE.FindStringSubmatch(msg)
	if m == nil {
		return &Error{Line: s.yamlLine, Message: "the front matter is not YAML: " + msg}
	}
	line := 1
	if m[1] != "" {
		line, _ = strconv.Atoi(m[1])
		if slices.Contains(yamlParserProblems, m[2]) {
			line++
		}
	}
	return &Error{Line: s.yamlLine + line - 1, Message: "the front matter is not YAML: " + m[2]}
}

// line is the file line of the value at p in the front matter: the line
// of its key, or of the list item; 0 when not found. The empty path is the
// opening --- line.
func (s *source) line(p path) int {
	if len(p) == 0 {
		return s.open
	}
	return s.lines[pathKey(p)]
}

// normalize turns a value decoded by dotprompt's YAML library into the
// values the builder reads: map[string]any, []any, string, bool,
// json.Number and nil. On error it returns the path of the bad value.
func normalize(v any, p path) (any, path, error) {
	switch v := v.(type) {
	case nil, string, bool, json.Number:
		return v, nil, nil
	case int:
		return json.Number(strconv.FormatInt(int64(v), 10)), nil, nil
	case int64:
		return json.Number(strconv.FormatInt(v, 10)), nil, nil
	case uint64:
		return json.Number(strconv.FormatUint(v, 10)), nil, nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, p, errors.New("a number must be finite")
		}
		return json.Number(strconv.FormatFloat(v, 'g', -1, 64)), nil, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			n, bad, err := normalize(v[k], p.key(k))
			if err != nil {
				return nil, bad, err
			}
			out[k] = n
		}
		return out, nil, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			n, bad, err := normalize(e, p.index(i))
			if err != nil {
				return nil, bad, err
			}
			out[i] = n
		}
		return out, nil, nil
	}
	return nil, p, fmt.Errorf("unsupported YAML value (%T)", v)
}

// asError returns err as an *Error.
func asError(err error, line int, field string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Line: line, Field: field, Message: oneLine(err.Error())}
}

// markerPrefix starts the markers dotprompt's helpers write into the
// rendered text (role, history, media, section).
const markerPrefix = "<<<dotprompt:"

// templateErrorRE matches raymond's parse errors.
var templateErrorRE = regexp.MustCompile(`^Parse error on line (\d+):\s*`)

// nodePosRE finds the byte position of the node of an evaluation error.
var nodePosRE = regexp.MustCompile(`Pos:(\d+)`)

// render renders the template of the .prompt file text with dotprompt and
// returns the system prompt. The template gets no input (the front matter
// may not give input.default), so what it renders is about as large as it
// is: no {{#each}} has anything to repeat.
func render(text, tpl string, tplLine int) (system string, err error) {
	// dotprompt splits the rendered text into messages at its markers: the
	// template may only make them with the helpers checked below.
	if i := strings.Index(tpl, markerPrefix); i >= 0 {
		line := 0
		if tplLine > 0 {
			line = tplLine + strings.Count(tpl[:i], "\n")
		}
		return "", templateErr(line, "%s...>>> markers are reserved for dotprompt's helpers", markerPrefix)
	}
	var roles []string
	history := false
	dp := dotprompt.NewDotprompt(&dotprompt.DotpromptOptions{Helpers: map[string]any{
		// Handlebars' log writes to the process's log: a tenant's template
		// may not. (Given a parameter or none, this one writes nothing; given
		// more, the template does not render.)
		"log": func(any) string { return "" },
		"role": func(role string) string {
			roles = append(roles, role)
			return dotprompt.RoleMarkerPrefix + role + ">>>"
		},
		"history": func() string {
			history = true
			return ""
		},
	}})
	var out dotprompt.RenderedPrompt
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = templateErr(0, "does not render: %v", r)
			}
		}()
		out, err = dp.Render(text, &dotprompt.DataArgument{}, nil)
	}()
	if err != nil {
		return "", renderError(err, tpl, tplLine)
	}
	if history {
		return "", templateErr(0, "{{history}} is not supported: the template is the agent's system prompt")
	}
	for _, r := range roles {
		if r != "system" {
			return "", templateErr(0, "{{role %q}} is not supported: the template is the agent's system prompt (plain text, or after {{role \"system\"}})", r)
		}
	}
	return systemText(out.Messages)
}

// templateErr is an error of the template at a line of the file (0 when
// it is not known).
func templateErr(line int, format string, args ...any) *Error {
	return &Error{Line: line, Field: "template", Message: fmt.Sprintf(format, args...)}
}

// renderError turns dotprompt's parse or evaluation error into one that
// names the line of the file, where its message gives one.
func renderError(err error, tpl string, tplLine int) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	msg := err.Error()
	line := 0
	if m := templateErrorRE.FindStringSubmatch(msg); m != nil {
		if n, _ := strconv.Atoi(m[1]); n > 0 && tplLine > 0 {
			line = tplLine + n - 1
		}
		return templateErr(line, "does not parse: %s", oneLine(msg[len(m[0]):]))
	}
	if m := nodePosRE.FindStringSubmatch(msg); m != nil && tplLine > 0 {
		if pos, _ := strconv.Atoi(m[1]); pos <= len(tpl) {
			line = tplLine + strings.Count(tpl[:pos], "\n")
		}
	}
	msg, _, _ = strings.Cut(msg, "\nCurrent node:")
	return templateErr(line, "does not render: %s", oneLine(strings.TrimPrefix(msg, "Evaluation error: ")))
}

// systemText joins the rendered messages' text, which must be one role's
// and text only: the template is the agent's system prompt.
func systemText(msgs []dotprompt.Message) (string, error) {
	var b strings.Builder
	var seen []string
	for _, m := range msgs {
		if !slices.Contains(seen, string(m.Role)) {
			seen = append(seen, string(m.Role))
		}
		for _, part := range m.Content {
			t, ok := part.(*dotprompt.TextPart)
			if !ok {
				return "", templateErr(0, "only text is supported (no {{media}} or {{section}})")
			}
			b.WriteString(t.Text)
		}
	}
	if len(seen) > 1 {
		return "", templateErr(0, "has several roles (%s): only a system prompt is supported; put {{role \"system\"}} first or leave it out", strings.Join(seen, ", "))
	}
	return strings.TrimSpace(b.String()), nil
}
