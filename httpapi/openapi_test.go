package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/service"
)

// The contract: every exchange the tests make with a server built by
// newServer, newAuthServer or newInboxServer is checked against the
// OpenAPI document, so that the document cannot drift from the code.
//
//   - A route the document does not name must be refused (4xx: 404 or
//     405 once credentials and limits passed) with the error body.
//   - A request the document calls invalid must be refused (4xx): the
//     bad-input tests send such requests on purpose, and only the answer
//     is checked against the document then.
//   - Every answer must have a documented status, and its body must match
//     the documented schema; an event stream's status and media type are
//     checked, not its frames' bodies (each frame of a streamed turn is
//     checked against StreamFrame).
//
// The dashboard under /ui serves HTML and is not in the document.

// contractRoute is one documented operation: its method and a pattern
// matching the escaped paths of its path template.
type contractRoute struct {
	method, template string
	pattern          *regexp.Regexp
}

// contractState is the document, parsed once for the whole test binary.
type contractState struct {
	// mu serializes the validator, which is not documented to be safe for
	// concurrent use.
	mu        sync.Mutex
	validator validator.Validator
	routes    []contractRoute
	// frame validates the data of a streamed turn's frames.
	frame func(data []byte) error
}

var (
	contractOnce sync.Once
	contractDoc  *contractState
	contractErr  error
)

// contract returns the parsed document, failing the test if it does not
// parse.
func contract(t testing.TB) *contractState {
	t.Helper()
	contractOnce.Do(func() { contractDoc, contractErr = loadContract() })
	if contractErr != nil {
		t.Fatalf("OpenAPI document: %v", contractErr)
	}
	return contractDoc
}

func loadContract() (*contractState, error) {
	doc, err := libopenapi.NewDocument(httpapi.OpenAPIDocument)
	if err != nil {
		return nil, err
	}
	// Security is not checked here: whether a route needs a credential
	// depends on the server (dev mode has none), and the answers (401,
	// 403) are checked like any other.
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions(), config.WithoutSecurityValidation())
	if len(errs) > 0 {
		return nil, fmt.Errorf("build validator: %v", errs)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("build model: %w", err)
	}
	st := &contractState{validator: v}
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		quoted := regexp.QuoteMeta(path)
		// QuoteMeta escapes the braces; match the escaped template.
		re := "^" + regexp.MustCompile(`\\\{[^}/]+\\\}`).ReplaceAllString(quoted, `[^/]+`) + "$"
		for method := range item.GetOperations().KeysFromOldest() {
			st.routes = append(st.routes, contractRoute{
				method:   strings.ToUpper(method),
				template: path,
				pattern:  regexp.MustCompile(re),
			})
		}
	}
	st.frame, err = schemaValidator("StreamFrame")
	if err != nil {
		return nil, err
	}
	return st, nil
}

// schemaValidator returns a check of JSON values against one of the
// document's component schemas.
func schemaValidator(name string) (func([]byte) error, error) {
	// The component is validated through a tiny document with one
	// operation answering it, so that every $ref resolves as in the
	// real one.
	var doc map[string]any
	if err := json.Unmarshal(httpapi.OpenAPIDocument, &doc); err != nil {
		return nil, err
	}
	doc["paths"] = map[string]any{"/frame": map[string]any{"get": map[string]any{
		"responses": map[string]any{"200": map[string]any{
			"description": "one value",
			"content": map[string]any{"application/json": map[string]any{
				"schema": map[string]any{"$ref": "#/components/schemas/" + name},
			}},
		}},
	}}}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	d, err := libopenapi.NewDocument(b)
	if err != nil {
		return nil, err
	}
	v, errs := validator.NewValidator(d, config.WithFormatAssertions(), config.WithoutSecurityValidation())
	if len(errs) > 0 {
		return nil, fmt.Errorf("build %s validator: %v", name, errs)
	}
	var mu sync.Mutex
	return func(data []byte) error {
		req, _ := http.NewRequest(http.MethodGet, "/frame", nil)
		res := &http.Response{
			StatusCode: http.StatusOK,
			Header:     http.Header{"Content-Type": {"application/json"}},
			Body:       io.NopCloser(bytes.NewReader(data)),
		}
		mu.Lock()
		ok, verrs := v.ValidateHttpResponse(req, res)
		mu.Unlock()
		if !ok {
			return fmt.Errorf("%s", describe(verrs))
		}
		return nil
	}, nil
}

// route finds the documented operation of a request.
func (st *contractState) route(method, escapedPath string) (contractRoute, bool) {
	for _, r := range st.routes {
		if r.method == method && r.pattern.MatchString(escapedPath) {
			return r, true
		}
	}
	return contractRoute{}, false
}

// describe joins validation errors into one text.
func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n    - %s: %s", e.Message, e.Reason)
		for _, se := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n      %s (%s): %s", se.FieldPath, se.KeywordLocation, se.Reason)
		}
	}
	return b.String()
}

// capturedBody records what the handler read of a request body.
type capturedBody struct {
	io.ReadCloser
	buf bytes.Buffer
	eof bool
}

// Read reads and records.
func (c *capturedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.buf.Write(p[:n])
	if err == io.EOF {
		c.eof = true
	}
	return n, err
}

// maxRecordedBody bounds the answer bytes kept for validation.
const maxRecordedBody = 4 << 20

// recorder passes an answer through and records its status and body.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	cut    bool // the body exceeded maxRecordedBody
}

// WriteHeader records the first final status.
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write records the body.
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len()+len(b) <= maxRecordedBody {
		r.body.Write(b)
	} else {
		r.cut = true
	}
	return r.ResponseWriter.Write(b)
}

// FlushError flushes the underlying writer (the event streams need it).
func (r *recorder) FlushError() error {
	return http.NewResponseController(r.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the underlying writer (read
// deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// contractChecked wraps a server's handler so that every exchange is
// checked against the document; the mismatches fail t when the test ends.
// Call it before registering the cleanup that closes the server, so the
// report runs after every request has finished. The document names the
// default base path of the agent routes: a server given another one is
// not checked.
func contractChecked(t *testing.T, opts httpapi.Options, h http.Handler) http.Handler {
	t.Helper()
	if base := strings.Trim(opts.BasePath, "/"); base != "" && "/"+base != httpapi.DefaultBasePath {
		return h
	}
	st := contract(t)
	var (
		mu       sync.Mutex
		failures []string
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range failures {
			t.Errorf("OpenAPI contract: %s", f)
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/ui" || strings.HasPrefix(req.URL.Path, "/ui/") {
			h.ServeHTTP(w, req)
			return
		}
		// With authentication the server reads every body but a .prompt
		// upload as JSON, whatever its declared type (the document says
		// so): check it as JSON too.
		asJSON := opts.Auth != nil && !isDeclared(req.Header.Get("Content-Type"))
		body := &capturedBody{ReadCloser: req.Body}
		hadBody := req.Body != nil && req.Body != http.NoBody
		if hadBody {
			req.Body = body
		}
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, req)
		problems := st.check(req, hadBody, asJSON, body, rec)
		if len(problems) > 0 {
			mu.Lock()
			for _, p := range problems {
				failures = append(failures, fmt.Sprintf("%s %s → %d: %s", req.Method, req.URL.RequestURI(), rec.status, p))
			}
			mu.Unlock()
		}
	})
}

// check returns what is wrong with one exchange.
func (st *contractState) check(req *http.Request, hadBody, asJSON bool, body *capturedBody, rec *recorder) []string {
	status := rec.status
	if status == 0 {
		status = http.StatusOK // nothing written: net/http sends 200
	}
	if status == 499 {
		return nil // the client went away; nobody read an answer
	}
	header := rec.Header()
	mediaType, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	stream := mediaType == "text/event-stream"

	var problems []string
	if _, ok := st.route(req.Method, req.URL.EscapedPath()); !ok {
		// Credentials and limits are checked before the route is known,
		// so any refusal may answer; nothing may succeed.
		if status < 400 || status >= 500 {
			return []string{"the route is not in the OpenAPI document (only a 4xx refusal may answer such a request)"}
		}
		if err := checkErrorBody(rec.body.Bytes()); err != nil {
			problems = append(problems, err.Error())
		}
		return problems
	}

	// The request as the handler received it, with the body it read.
	clone := req.Clone(req.Context())
	if asJSON {
		clone.Header.Set("Content-Type", "application/json")
	}
	bodyKnown := !hadBody || body.eof
	if hadBody && body.eof {
		clone.Body = io.NopCloser(bytes.NewReader(body.buf.Bytes()))
	} else {
		clone.Body = http.NoBody
	}
	if bodyKnown {
		st.mu.Lock()
		ok, errs := st.validator.ValidateHttpRequestSync(clone)
		st.mu.Unlock()
		if !ok && !refused(status, stream, rec.body.String()) {
			problems = append(problems, "the server accepted a request the document calls invalid:"+describe(errs))
		}
	}

	res := &http.Response{StatusCode: status, Header: header, Body: http.NoBody, Request: clone}
	if !stream && !rec.cut {
		res.Body = io.NopCloser(bytes.NewReader(rec.body.Bytes()))
	}
	clone.Body = http.NoBody
	st.mu.Lock()
	ok, errs := st.validator.ValidateHttpResponse(clone, res)
	st.mu.Unlock()
	if !ok {
		problems = append(problems, "the answer does not match the document:"+describe(errs))
	}
	if stream && strings.HasPrefix(req.URL.Path, "/api/agents/") && !rec.cut {
		for _, data := range sseData(rec.body.String()) {
			if err := st.frame([]byte(data)); err != nil {
				problems = append(problems, fmt.Sprintf("stream frame %s does not match StreamFrame:%v", truncate(data), err))
			}
		}
	}
	return problems
}

// refused reports whether an answer refuses its request: a 4xx, or a
// streamed turn's single error frame (how a refused streamed turn is
// answered, as the Genkit reference server does).
func refused(status int, stream bool, body string) bool {
	if status >= 400 && status < 500 {
		return true
	}
	if !stream || status != http.StatusOK {
		return false
	}
	frames := sseData(body)
	return len(frames) == 1 && strings.HasPrefix(frames[0], `{"error":`)
}

// isDeclared reports whether a Content-Type is one the document declares
// for request bodies.
func isDeclared(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || mt == "text/x-dotprompt")
}

// sseData returns the data of each complete event of an event stream.
func sseData(stream string) []string {
	var out []string
	for _, event := range strings.Split(stream, "\n\n") {
		var data []string
		for _, line := range strings.Split(event, "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(d, " "))
			}
		}
		if len(data) > 0 {
			out = append(out, strings.Join(data, "\n"))
		}
	}
	// The last piece may be a frame cut off by a disconnection.
	if !strings.HasSuffix(stream, "\n\n") && len(out) > 0 {
		out = out[:len(out)-1]
	}
	return out
}

// truncate shortens a text for a failure message.
func truncate(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// checkErrorBody checks an answer of an undocumented route: the error
// body, exactly.
func checkErrorBody(b []byte) error {
	var e struct {
		Status    string          `json:"status"`
		Message   string          `json:"message"`
		Details   json.RawMessage `json:"details"`
		RequestID string          `json:"requestId"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Status == "" || e.Message == "" {
		return fmt.Errorf("the answer is not the error body {status, message, details?, requestId}: %s", truncate(string(b)))
	}
	return nil
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	st := contract(t)
	st.mu.Lock()
	ok, errs := st.validator.ValidateDocument()
	st.mu.Unlock()
	if !ok {
		t.Fatalf("the OpenAPI document is not valid OpenAPI 3.1:%s", describe(errs))
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(httpapi.OpenAPIDocument, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q (%v), want 3.1.0", doc.OpenAPI, err)
	}
}

// echoParam matches an Echo path parameter.
var echoParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

func TestOpenAPINamesEveryRoute(t *testing.T) {
	t.Parallel()
	st := contract(t)
	e := httpapi.New(service.NewRuntime(nil, service.Options{}), httpapi.Options{})
	var served, documented []string
	for _, r := range e.Routes() {
		if r.Path == "/ui" || strings.HasPrefix(r.Path, "/ui/") {
			continue // the dashboard's HTML pages
		}
		served = append(served, r.Method+" "+echoParam.ReplaceAllString(r.Path, "{$1}"))
	}
	for _, r := range st.routes {
		documented = append(documented, r.method+" "+r.template)
	}
	slices.Sort(served)
	served = slices.Compact(served)
	slices.Sort(documented)
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("the server has %s, which the OpenAPI document does not name", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("the OpenAPI document names %s, which the server does not have", r)
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	committed, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	// A server with authentication: the document needs no credential.
	s := newAuthServer(t, nil)
	res, err := s.srv.Client().Get(s.srv.URL + httpapi.OpenAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || !bytes.Equal(body, committed) {
		t.Fatalf("GET %s = %d, %d bytes; want 200 and the committed openapi.json (%d bytes)", httpapi.OpenAPIPath, res.StatusCode, len(body), len(committed))
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	etag := res.Header.Get("ETag")
	if etag == "" || res.Header.Get("Cache-Control") == "" {
		t.Fatalf("ETag %q, Cache-Control %q: want both", etag, res.Header.Get("Cache-Control"))
	}
	ts := &testServer{srv: s.srv}
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+httpapi.OpenAPIPath, nil)
	req.Header.Set("If-None-Match", etag)
	r := ts.do(t, req)
	if r.status != http.StatusNotModified || len(r.body) != 0 {
		t.Errorf("with If-None-Match: %d, %d bytes; want 304 and no body", r.status, len(r.body))
	}
	req.Header.Set("If-None-Match", `"other", W/`+etag)
	if r := ts.do(t, req); r.status != http.StatusNotModified {
		t.Errorf("with If-None-Match naming it in a list: %d; want 304", r.status)
	}
	req.Header.Set("If-None-Match", `"stale"`)
	if r := ts.do(t, req); r.status != http.StatusOK || !bytes.Equal(r.body, committed) {
		t.Errorf("with a stale If-None-Match: %d; want 200 and the document", r.status)
	}
}

// TestContractCatchesDrift checks the checker: exchanges that break the
// document in each way it guards against are reported, and a conforming
// one is not.
func TestContractCatchesDrift(t *testing.T) {
	t.Parallel()
	st := contract(t)
	exchange := func(method, target, reqBody string, status int, contentType, resBody string) []string {
		req, _ := http.NewRequest(method, target, strings.NewReader(reqBody))
		req.Header.Set("Content-Type", "application/json")
		hadBody := reqBody != ""
		body := &capturedBody{ReadCloser: io.NopCloser(strings.NewReader(reqBody))}
		if _, err := io.ReadAll(body); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{ResponseWriter: httptest.NewRecorder(), status: status}
		if contentType != "" {
			rec.Header().Set("Content-Type", contentType)
		}
		rec.body.WriteString(resBody)
		return st.check(req, hadBody, false, body, rec)
	}
	const run = `{"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}}`
	const output = `{"result": {"sessionId": "s", "snapshotId": "x", "finishReason": "stop"}}`
	cases := []struct {
		name              string
		method, target    string
		reqBody           string
		status            int
		contentType, body string
		wantProblem       bool
	}{
		{"conforming turn", "POST", "/api/agents/a", run, 200, "application/json", output, false},
		{"refused bad input", "POST", "/api/agents/a", `{"data": {"detach": "yes"}}`, 400, "application/json", `{"status": "INVALID_ARGUMENT", "message": "m", "requestId": "r"}`, false},
		{"streamed refusal", "POST", "/api/agents/a", `{"data": {"detach": "yes"}}`, 200, "text/event-stream", "data: {\"error\":{\"status\":\"INVALID_ARGUMENT\",\"message\":\"m\"}}\n\n", false},
		{"bad input accepted", "POST", "/api/agents/a", `{"data": {"detach": "yes"}}`, 200, "application/json", output, true},
		{"undocumented status", "POST", "/api/agents/a", run, 418, "application/json", `{"status": "INTERNAL", "message": "m"}`, true},
		{"answer off schema", "POST", "/api/agents/a", run, 200, "application/json", `{"result": {"finishReason": "done"}}`, true},
		{"undocumented member", "GET", "/api/agents", "", 200, "application/json", `{"agents": [], "extra": 1}`, true},
		{"error body off schema", "GET", "/api/agents", "", 500, "application/json", `{"error": "boom"}`, true},
		{"undocumented route served", "GET", "/api/v1/secret", "", 200, "application/json", `{}`, true},
		{"undocumented route refused", "GET", "/api/v1/secret", "", 404, "application/json", `{"status": "NOT_FOUND", "message": "no such route"}`, false},
		{"stream frame off schema", "POST", "/api/agents/a", run, 200, "text/event-stream", "data: {\"message\":{\"modelChunk\":{\"content\":\"x\"}}}\n\n", true},
		{"stream where JSON is documented", "GET", "/api/agents", "", 200, "text/event-stream", "data: {}\n\n", true},
	}
	for _, c := range cases {
		problems := exchange(c.method, c.target, c.reqBody, c.status, c.contentType, c.body)
		if got := len(problems) > 0; got != c.wantProblem {
			t.Errorf("%s: problems %q, want some: %v", c.name, problems, c.wantProblem)
		}
	}
}
