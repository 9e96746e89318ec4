package genkitmodel

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/firebase/genkit/go/ai"

	"github.com/holdpoint/holdpoint/service/protocol"
)

// The conversions below go field by field rather than through JSON: Genkit
// Go's Part JSON differs from the protocol's (JS) schema. Its data part holds
// a string (a data: URI) where the protocol allows any JSON value, an empty
// text part is not distinguished from an empty part, and custom parts must be
// objects. Our own types stay the stored form; Genkit's exist only for the
// duration of a model call.

// contentTypeJSON marks a Genkit data part whose Text holds a JSON value
// rather than a plain string, so that the value converts back unchanged.
const contentTypeJSON = "application/json"

// messagesToGenkit converts a conversation to Genkit messages.
func messagesToGenkit(msgs []protocol.Message) ([]*ai.Message, error) {
	out := make([]*ai.Message, 0, len(msgs))
	for i, m := range msgs {
		gm, err := messageToGenkit(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		out = append(out, gm)
	}
	return out, nil
}

// messageToGenkit converts one message. Keys our types keep as Extra have no
// place in Genkit's types and are not sent to the model.
func messageToGenkit(m protocol.Message) (*ai.Message, error) {
	meta, err := metadataToGenkit(m.Metadata)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	parts, err := partsToGenkit(m.Content)
	if err != nil {
		return nil, err
	}
	return &ai.Message{Role: ai.Role(m.Role), Content: parts, Metadata: meta}, nil
}

// messageFromGenkit converts a Genkit message back to ours.
func messageFromGenkit(m *ai.Message) (protocol.Message, error) {
	if m == nil {
		return protocol.Message{Role: protocol.RoleModel, Content: []protocol.Part{}}, nil
	}
	meta, err := metadataFromGenkit(m.Metadata)
	if err != nil {
		return protocol.Message{}, fmt.Errorf("metadata: %w", err)
	}
	parts, err := partsFromGenkit(m.Content)
	if err != nil {
		return protocol.Message{}, err
	}
	return protocol.Message{Role: string(m.Role), Content: parts, Metadata: meta}, nil
}

// partsToGenkit converts parts, dropping parts of no kind Genkit knows.
func partsToGenkit(parts []protocol.Part) ([]*ai.Part, error) {
	out := make([]*ai.Part, 0, len(parts))
	for i, p := range parts {
		gp, err := partToGenkit(p)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		if gp != nil {
			out = append(out, gp)
		}
	}
	return out, nil
}

// partsFromGenkit converts Genkit parts back to ours; nil parts are skipped.
func partsFromGenkit(parts []*ai.Part) ([]protocol.Part, error) {
	out := make([]protocol.Part, 0, len(parts))
	for i, p := range parts {
		if p == nil {
			continue
		}
		sp, err := partFromGenkit(p)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		out = append(out, sp)
	}
	return out, nil
}

// mediaValue is the protocol's media object.
type mediaValue struct {
	URL         string `json:"url"`
	ContentType string `json:"contentType,omitempty"`
}

// resourceValue is the protocol's resource object.
type resourceValue struct {
	URI string `json:"uri"`
}

// partToGenkit converts one part. It returns nil for a part that carries
// none of the known kinds (only unknown keys), which a model cannot use.
func partToGenkit(p protocol.Part) (*ai.Part, error) {
	meta, err := metadataToGenkit(p.Metadata)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	gp := &ai.Part{Metadata: meta}
	switch {
	case p.Text != nil:
		gp.Kind = ai.PartText
		gp.Text = *p.Text
	case p.Reasoning != nil:
		gp.Kind = ai.PartReasoning
		gp.ContentType = "plain/text"
		gp.Text = *p.Reasoning
	case p.Media != nil:
		var m mediaValue
		if err := json.Unmarshal(p.Media, &m); err != nil {
			return nil, fmt.Errorf("media: %w", err)
		}
		gp.Kind = ai.PartMedia
		gp.ContentType = m.ContentType
		gp.Text = m.URL
	case p.ToolRequest != nil:
		input, err := decodeAny(p.ToolRequest.Input)
		if err != nil {
			return nil, fmt.Errorf("toolRequest.input: %w", err)
		}
		gp.Kind = ai.PartToolRequest
		gp.ToolRequest = &ai.ToolRequest{Name: p.ToolRequest.Name, Ref: p.ToolRequest.Ref, Input: input}
	case p.ToolResponse != nil:
		resp, err := toolResponseToGenkit(p.ToolResponse)
		if err != nil {
			return nil, err
		}
		gp.Kind = ai.PartToolResponse
		gp.ToolResponse = resp
	case p.Data != nil:
		gp.Kind = ai.PartData
		gp.ContentType, gp.Text = dataToGenkit(p.Data)
	case p.Custom != nil:
		var custom map[string]any
		if err := decodeInto(p.Custom, &custom); err != nil {
			return nil, fmt.Errorf("custom must be a JSON object: %w", err)
		}
		if custom == nil {
			custom = map[string]any{}
		}
		gp.Kind = ai.PartCustom
		gp.Custom = custom
	case p.Resource != nil:
		var r resourceValue
		if err := json.Unmarshal(p.Resource, &r); err != nil {
			return nil, fmt.Errorf("resource: %w", err)
		}
		gp.Kind = ai.PartResource
		gp.Resource = &ai.ResourcePart{Uri: r.URI}
	default:
		return nil, nil
	}
	return gp, nil
}

// toolResponseToGenkit converts a tool response, its content parts too.
func toolResponseToGenkit(r *protocol.ToolResponse) (*ai.ToolResponse, error) {
	output, err := decodeAny(r.Output)
	if err != nil {
		return nil, fmt.Errorf("toolResponse.output: %w", err)
	}
	var content []*ai.Part
	if r.Content != nil {
		var parts []protocol.Part
		if err := json.Unmarshal(r.Content, &parts); err != nil {
			return nil, fmt.Errorf("toolResponse.content: %w", err)
		}
		if content, err = partsToGenkit(parts); err != nil {
			return nil, fmt.Errorf("toolResponse.content: %w", err)
		}
	}
	return &ai.ToolResponse{Name: r.Name, Ref: r.Ref, Output: output, Content: content}, nil
}

// dataToGenkit gives a data part's content type and text. Genkit Go's data
// part is a string (plugins read it as a data: URI); a JSON string goes
// over as that string, any other value as its JSON text marked with
// contentTypeJSON.
func dataToGenkit(data json.RawMessage) (contentType, text string) {
	var s string
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte{'"'}) && json.Unmarshal(data, &s) == nil {
		return "", s
	}
	return contentTypeJSON, string(bytes.TrimSpace(data))
}

// partFromGenkit converts one Genkit part back to ours.
func partFromGenkit(p *ai.Part) (protocol.Part, error) {
	meta, err := metadataFromGenkit(p.Metadata)
	if err != nil {
		return protocol.Part{}, fmt.Errorf("metadata: %w", err)
	}
	out := protocol.Part{Metadata: meta}
	switch p.Kind {
	case ai.PartText:
		s := p.Text
		out.Text = &s
	case ai.PartReasoning:
		s := p.Text
		out.Reasoning = &s
	case ai.PartMedia:
		if out.Media, err = encode(mediaValue{URL: p.Text, ContentType: p.ContentType}); err != nil {
			return protocol.Part{}, err
		}
	case ai.PartData:
		if p.ContentType == contentTypeJSON && json.Valid([]byte(p.Text)) {
			out.Data = json.RawMessage(p.Text)
		} else if out.Data, err = encode(p.Text); err != nil {
			return protocol.Part{}, err
		}
	case ai.PartToolRequest:
		if p.ToolRequest == nil {
			return protocol.Part{}, fmt.Errorf("tool request part without a request")
		}
		input, err := encodeAny(p.ToolRequest.Input)
		if err != nil {
			return protocol.Part{}, fmt.Errorf("toolRequest.input: %w", err)
		}
		out.ToolRequest = &protocol.ToolRequest{Name: p.ToolRequest.Name, Ref: p.ToolRequest.Ref, Input: input}
	case ai.PartToolResponse:
		if out.ToolResponse, err = toolResponseFromGenkit(p.ToolResponse); err != nil {
			return protocol.Part{}, err
		}
	case ai.PartCustom:
		custom := p.Custom
		if custom == nil {
			custom = map[string]any{}
		}
		if out.Custom, err = encode(custom); err != nil {
			return protocol.Part{}, err
		}
	case ai.PartResource:
		var uri string
		if p.Resource != nil {
			uri = p.Resource.Uri
		}
		if out.Resource, err = encode(resourceValue{URI: uri}); err != nil {
			return protocol.Part{}, err
		}
	default:
		return protocol.Part{}, fmt.Errorf("unknown Genkit part kind %d", p.Kind)
	}
	return out, nil
}

// toolResponseFromGenkit converts a Genkit tool response back to ours.
func toolResponseFromGenkit(r *ai.ToolResponse) (*protocol.ToolResponse, error) {
	if r == nil {
		return nil, fmt.Errorf("tool response part without a response")
	}
	output, err := encodeAny(r.Output)
	if err != nil {
		return nil, fmt.Errorf("toolResponse.output: %w", err)
	}
	var content json.RawMessage
	if len(r.Content) > 0 {
		parts, err := partsFromGenkit(r.Content)
		if err != nil {
			return nil, fmt.Errorf("toolResponse.content: %w", err)
		}
		if content, err = encode(parts); err != nil {
			return nil, err
		}
	}
	return &protocol.ToolResponse{Name: r.Name, Ref: r.Ref, Output: output, Content: content}, nil
}

// toolsToGenkit converts tool definitions; JSON Schemas must be objects.
func toolsToGenkit(tools []protocol.ToolDefinition) ([]*ai.ToolDefinition, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	out := make([]*ai.ToolDefinition, 0, len(tools))
	for _, t := range tools {
		td := &ai.ToolDefinition{Name: t.Name, Description: t.Description}
		if err := decodeInto(t.InputSchema, &td.InputSchema); err != nil {
			return nil, fmt.Errorf("tool %q: inputSchema must be a JSON object: %w", t.Name, err)
		}
		if err := decodeInto(t.OutputSchema, &td.OutputSchema); err != nil {
			return nil, fmt.Errorf("tool %q: outputSchema must be a JSON object: %w", t.Name, err)
		}
		out = append(out, td)
	}
	return out, nil
}

// finishReason maps a Genkit finish reason to the protocol's model finish
// reasons (stop, length, blocked, interrupted, other, unknown). Genkit Go's
// extra "aborted" becomes other; anything unrecognised or empty, unknown.
func finishReason(r ai.FinishReason) string {
	switch r {
	case ai.FinishReasonStop:
		return protocol.FinishStop
	case ai.FinishReasonLength:
		return protocol.FinishLength
	case ai.FinishReasonBlocked:
		return protocol.FinishBlocked
	case ai.FinishReasonInterrupted:
		return protocol.FinishInterrupted
	case ai.FinishReasonOther, ai.FinishReasonAborted:
		return protocol.FinishOther
	default:
		return protocol.FinishUnknown
	}
}

// metadataToGenkit decodes raw metadata members into Go values.
func metadataToGenkit(m protocol.Metadata) (map[string]any, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]any, len(m))
	for k, raw := range m {
		v, err := decodeAny(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

// metadataFromGenkit encodes Genkit metadata values as raw JSON. A []byte
// (reasoning signatures) becomes a base64 string, which the plugins accept
// back.
func metadataFromGenkit(m map[string]any) (protocol.Metadata, error) {
	if m == nil {
		return nil, nil
	}
	out := make(protocol.Metadata, len(m))
	for k, v := range m {
		raw, err := encode(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = raw
	}
	return out, nil
}

// decodeAny decodes raw JSON into a Go value, keeping numbers exact as
// json.Number; empty input gives nil.
func decodeAny(raw json.RawMessage) (any, error) {
	var v any
	if err := decodeInto(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// decodeInto decodes raw JSON into dst with json.Number for numbers; empty
// input leaves dst unchanged.
func decodeInto(raw json.RawMessage, dst any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(dst)
}

// encodeAny encodes a Go value as raw JSON; nil gives nil (absent).
func encodeAny(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	return encode(v)
}

// encode marshals v without HTML escaping.
func encode(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n")), nil
}
