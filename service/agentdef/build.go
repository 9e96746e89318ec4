package agentdef

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holdpoint/holdpoint/service/schema"
)

const (
	resumeSession = "session"
	resumeLatest  = "latest"

	defaultTimeout   = 10 * time.Second
	maxTimeout       = 60 * time.Second
	maxToolRoundsMax = 50
)

// nameRE is the pattern of agent and tool names.
var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// form is the form being parsed.
type form int

const (
	promptForm form = iota
	jsonForm
)

// path is the place of a value: keys (string) and indexes (int).
type path []any

func (p path) key(k string) path { return append(p[:len(p):len(p)], k) }
func (p path) index(i int) path  { return append(p[:len(p):len(p)], i) }

// String writes p as "holdpoint.httpTools[0].url".
func (p path) String() string {
	var b strings.Builder
	for _, e := range p {
		switch e := e.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(e)
		case int:
			fmt.Fprintf(&b, "[%d]", e)
		}
	}
	return b.String()
}

// builder turns a decoded definition (maps, slices, strings, bools,
// json.Number and nil) into a Definition.
type builder struct {
	// lines gives the .prompt line of a path (0 when unknown); nil for the
	// JSON form.
	lines func(path) int
}

func (b *builder) line(p path) int {
	if b.lines == nil {
		return 0
	}
	return b.lines(p)
}

// errf is an error about the value at p.
func (b *builder) errf(p path, format string, args ...any) *Error {
	return &Error{Line: b.line(p), Field: p.String(), Message: fmt.Sprintf(format, args...)}
}

// missing is the error of a required key absent from the mapping at p.
func (b *builder) missing(p path, key string) *Error {
	return &Error{Line: b.line(p), Field: p.key(key).String(), Message: "is required"}
}

// keyCheck says whether a key is allowed, and why not.
type keyCheck func(key string) (ok bool, why string)

func allowOnly(keys ...string) keyCheck {
	return func(k string) (bool, string) {
		if slices.Contains(keys, k) {
			return true, ""
		}
		return false, "unknown key (allowed: " + strings.Join(keys, ", ") + ")"
	}
}

// checkKeys refuses the first key of m (in file order) that check refuses.
func (b *builder) checkKeys(m map[string]any, p path, check keyCheck) error {
	var first *Error
	for k := range m {
		ok, why := check(k)
		if ok {
			continue
		}
		e := b.errf(p.key(k), "%s", why)
		if first == nil || e.Line < first.Line || (e.Line == first.Line && e.Field < first.Field) {
			first = e
		}
	}
	if first == nil {
		return nil
	}
	return first
}

// mapping returns the mapping at m[key] (nil when absent or null).
func (b *builder) mapping(m map[string]any, p path, key string) (map[string]any, error) {
	v := m[key]
	if v == nil {
		return nil, nil
	}
	out, ok := v.(map[string]any)
	if !ok {
		return nil, b.errf(p.key(key), "must be a mapping (%s)", kind(v))
	}
	return out, nil
}

// list returns the list at m[key] (nil when absent or null).
func (b *builder) list(m map[string]any, p path, key string) ([]any, error) {
	v := m[key]
	if v == nil {
		return nil, nil
	}
	out, ok := v.([]any)
	if !ok {
		return nil, b.errf(p.key(key), "must be a list (%s)", kind(v))
	}
	return out, nil
}

// str returns the string at m[key] ("" when absent or null).
func (b *builder) str(m map[string]any, p path, key string) (string, error) {
	v := m[key]
	if v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", b.errf(p.key(key), "must be a string (%s)", kind(v))
	}
	return s, nil
}

// kind names the JSON type of a decoded value, for messages.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

// promptKeys are the front matter keys of a .prompt file.
func promptKeys(k string) (bool, string) {
	switch k {
	case "name", "description", "model", "config", "tools", "version", "variant", "holdpoint":
		return true, ""
	case "input":
		return false, "is not supported: the template is rendered once, with no input"
	case "output":
		return false, "is not supported: an agent answers in text (structured output is not available)"
	case "toolDefs":
		return false, "is not supported: declare tools under holdpoint.interrupts and holdpoint.httpTools"
	case "maxTurns":
		return false, "is not supported: use holdpoint.maxToolRounds"
	case "raw", "ext":
		return false, "is reserved by dotprompt and cannot be set"
	}
	if strings.HasPrefix(k, "holdpoint.") {
		return false, "write holdpoint settings under the holdpoint: mapping"
	}
	if strings.Contains(k, ".") {
		return true, "" // another tool's dotprompt extension: ignored
	}
	return false, "unknown front matter key (allowed: name, description, model, config, tools, version, variant, holdpoint, and extension keys with a dot)"
}

// definition builds a Definition from the front matter (or JSON object)
// root. System is left for the caller in the .prompt form.
func (b *builder) definition(root map[string]any, f form) (*Definition, error) {
	var top path
	check := keyCheck(promptKeys)
	if f == jsonForm {
		check = allowOnly("name", "description", "model", "config", "system", "tools", "holdpoint")
	}
	if err := b.checkKeys(root, top, check); err != nil {
		return nil, err
	}
	d := &Definition{Resume: resumeSession}
	var err error
	if d.Name, err = b.str(root, top, "name"); err != nil {
		return nil, err
	}
	if d.Name != "" && !nameRE.MatchString(d.Name) {
		return nil, b.errf(top.key("name"), "%q is not a valid name: a letter, then letters, digits, _ or -, 64 at most", d.Name)
	}
	if d.Description, err = b.str(root, top, "description"); err != nil {
		return nil, err
	}
	if err := b.modelAndConfig(root, top, d); err != nil {
		return nil, err
	}
	if f == jsonForm {
		if d.System, err = b.str(root, top, "system"); err != nil {
			return nil, err
		}
	}
	if err := b.holdpoint(root, top, d); err != nil {
		return nil, err
	}
	if err := b.tools(root, top, d); err != nil {
		return nil, err
	}
	return d, nil
}

// modelAndConfig reads the model and its configuration. The model is the
// model key alone: a configuration that names one (as a provider's
// request would take it, in any case) is refused.
func (b *builder) modelAndConfig(root map[string]any, top path, d *Definition) error {
	var err error
	if d.Model, err = b.str(root, top, "model"); err != nil {
		return err
	}
	if strings.TrimSpace(d.Model) == "" {
		if _, present := root["model"]; present {
			return b.errf(top.key("model"), "must not be empty")
		}
		return b.missing(top, "model")
	}
	if msg := checkModelID(d.Model); msg != "" {
		return b.errf(top.key("model"), "%q is not a model id: %s", d.Model, msg)
	}
	config, err := b.mapping(root, top, "config")
	if err != nil || config == nil {
		return err
	}
	for k := range config {
		if strings.EqualFold(k, "model") {
			return b.errf(top.key("config").key(k), "the model is the model key (%s); the configuration may not name another", d.Model)
		}
	}
	if d.Config, err = canonicalJSON(config); err != nil {
		return b.errf(top.key("config"), "%s", err)
	}
	return nil
}

// modelPartRE is one /-separated part of a model id.
var modelPartRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@+-]*$`)

// checkModelID says what is wrong with a model id ("" when nothing): a
// name (demo) or provider/name, at most 4 parts separated by /, each of
// letters, digits and . _ : @ + - beginning with a letter or digit, no
// "..", 200 bytes at most. Which providers and names are served is the
// caller's to check.
func checkModelID(id string) string {
	switch {
	case len(id) > 200:
		return "longer than 200 bytes"
	case strings.Contains(id, ".."):
		return `it contains ".."`
	case strings.Count(id, "/") > 3:
		return "more than 4 parts separated by /"
	}
	for _, part := range strings.Split(id, "/") {
		if !modelPartRE.MatchString(part) {
			return "want provider/name, each part letters, digits and . _ : @ + -, beginning with a letter or digit"
		}
	}
	return ""
}

// holdpoint reads the holdpoint extension key.
func (b *builder) holdpoint(root map[string]any, top path, d *Definition) error {
	hp, err := b.mapping(root, top, "holdpoint")
	if err != nil || hp == nil {
		return err
	}
	p := top.key("holdpoint")
	if err := b.checkKeys(hp, p, allowOnly("interrupts", "httpTools", "maxToolRounds", "resume")); err != nil {
		return err
	}
	if err := b.declaredTools(hp, p, d); err != nil {
		return err
	}
	if v := hp["maxToolRounds"]; v != nil {
		n, ok := integer(v)
		if !ok || n < 1 || n > maxToolRoundsMax {
			return b.errf(p.key("maxToolRounds"), "must be a whole number from 1 to %d", maxToolRoundsMax)
		}
		d.MaxToolRounds = int(n)
	}
	resume, err := b.str(hp, p, "resume")
	if err != nil {
		return err
	}
	switch resume {
	case "":
	case resumeSession, resumeLatest:
		d.Resume = resume
	default:
		return b.errf(p.key("resume"), "must be %q or %q, not %q", resumeSession, resumeLatest, resume)
	}
	return nil
}

// declaredTools reads the interrupts and HTTP tools under holdpoint, which share
// one namespace of tool names.
func (b *builder) declaredTools(hp map[string]any, p path, d *Definition) error {
	declared := map[string]string{} // tool name -> field of its declaration
	declare := func(item path, name string) error {
		if first, dup := declared[name]; dup {
			return b.errf(item.key("name"), "%q is already the name of %s (interrupts and HTTP tools share one namespace)", name, first)
		}
		declared[name] = item.String()
		return nil
	}
	interrupts, err := b.list(hp, p, "interrupts")
	if err != nil {
		return err
	}
	for i, v := range interrupts {
		item := p.key("interrupts").index(i)
		it, err := b.interrupt(v, item)
		if err != nil {
			return err
		}
		if err := declare(item, it.Name); err != nil {
			return err
		}
		d.Interrupts = append(d.Interrupts, *it)
	}
	tools, err := b.list(hp, p, "httpTools")
	if err != nil {
		return err
	}
	for i, v := range tools {
		item := p.key("httpTools").index(i)
		t, err := b.httpTool(v, item)
		if err != nil {
			return err
		}
		if err := declare(item, t.Name); err != nil {
			return err
		}
		d.HTTPTools = append(d.HTTPTools, *t)
	}
	return nil
}

// integer returns the value of a whole number.
func integer(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// toolName reads the name of a declared tool.
func (b *builder) toolName(m map[string]any, item path) (string, error) {
	name, err := b.str(m, item, "name")
	if err != nil {
		return "", err
	}
	if name == "" {
		if _, present := m["name"]; present {
			return "", b.errf(item.key("name"), "must not be empty")
		}
		return "", b.missing(item, "name")
	}
	if !nameRE.MatchString(name) {
		return "", b.errf(item.key("name"), "%q is not a valid tool name: a letter, then letters, digits, _ or -, 64 at most", name)
	}
	return name, nil
}

// interruptKeys are the keys of an interrupt.
func interruptKeys(k string) (bool, string) {
	if k == "approval" {
		return false, "is for HTTP tools: an interrupt already asks a human, whose answer is its output"
	}
	return allowOnly("name", "description", "input", "output", "expiresAfter", "onExpire")(k)
}

// interrupt reads holdpoint.interrupts[i].
func (b *builder) interrupt(v any, item path) (*Interrupt, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, b.errf(item, "must be a mapping (%s)", kind(v))
	}
	if err := b.checkKeys(m, item, interruptKeys); err != nil {
		return nil, err
	}
	it := &Interrupt{}
	var err error
	if it.Name, err = b.toolName(m, item); err != nil {
		return nil, err
	}
	if it.Description, err = b.str(m, item, "description"); err != nil {
		return nil, err
	}
	if it.Input, err = b.schema(m, item, "input", false); err != nil {
		return nil, err
	}
	if it.Output, err = b.schema(m, item, "output", true); err != nil {
		return nil, err
	}
	if v := m["expiresAfter"]; v != nil {
		d, ok := duration(v)
		if !ok || d <= 0 {
			return nil, b.errf(item.key("expiresAfter"), "must be a positive duration such as 24h or 90m")
		}
		it.ExpiresAfter = d
	}
	if v := m["onExpire"]; v != nil {
		p := item.key("onExpire")
		if it.ExpiresAfter == 0 {
			return nil, b.errf(p, "needs expiresAfter: without a deadline nothing expires")
		}
		if it.OnExpire, err = canonicalJSON(v); err != nil {
			return nil, b.errf(p, "%s", err)
		}
		if v := schema.Validate(it.Output, it.OnExpire); len(v) > 0 {
			return nil, b.errf(p, "does not match the output schema: %s", strings.Join(v, "; "))
		}
	}
	return it, nil
}

// httpTool reads holdpoint.httpTools[i].
func (b *builder) httpTool(v any, item path) (*HTTPTool, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, b.errf(item, "must be a mapping (%s)", kind(v))
	}
	if err := b.checkKeys(m, item, allowOnly("name", "description", "url", "timeout", "approval", "input", "output")); err != nil {
		return nil, err
	}
	t := &HTTPTool{Timeout: defaultTimeout}
	var err error
	if t.Name, err = b.toolName(m, item); err != nil {
		return nil, err
	}
	if t.Description, err = b.str(m, item, "description"); err != nil {
		return nil, err
	}
	if t.URL, err = b.str(m, item, "url"); err != nil {
		return nil, err
	}
	if t.URL == "" {
		if _, present := m["url"]; present {
			return nil, b.errf(item.key("url"), "must be an absolute http(s) URL")
		}
		return nil, b.missing(item, "url")
	}
	if u, err := url.Parse(t.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, b.errf(item.key("url"), "must be an absolute http(s) URL")
	}
	if v := m["timeout"]; v != nil {
		d, ok := duration(v)
		if !ok || d <= 0 || d > maxTimeout {
			return nil, b.errf(item.key("timeout"), "must be a duration such as 10s, more than 0 and at most %s", formatDuration(maxTimeout))
		}
		t.Timeout = d
	}
	if t.Approval, err = b.approval(m["approval"], item.key("approval"), t.Name); err != nil {
		return nil, err
	}
	if t.Input, err = b.schema(m, item, "input", true); err != nil {
		return nil, err
	}
	if t.Output, err = b.schema(m, item, "output", true); err != nil {
		return nil, err
	}
	return t, nil
}

// duration reads a duration string such as "24h".
func duration(v any) (time.Duration, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// tools reads the tools key: the names the model may call.
func (b *builder) tools(root map[string]any, top path, d *Definition) error {
	declared := map[string]bool{}
	var all []string
	for _, it := range d.Interrupts {
		declared[it.Name] = true
		all = append(all, it.Name)
	}
	for _, t := range d.HTTPTools {
		declared[t.Name] = true
		all = append(all, t.Name)
	}
	if root["tools"] == nil {
		d.Tools = all
		return nil
	}
	list, err := b.list(root, top, "tools")
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, v := range list {
		p := top.key("tools").index(i)
		name, ok := v.(string)
		if !ok {
			return b.errf(p, "must be a tool name (%s)", kind(v))
		}
		if !declared[name] {
			return b.errf(p, "%q is neither a declared interrupt nor a declared HTTP tool (holdpoint.interrupts, holdpoint.httpTools)", name)
		}
		if seen[name] {
			return b.errf(p, "%q is listed twice", name)
		}
		seen[name] = true
		d.Tools = append(d.Tools, name)
	}
	return nil
}
