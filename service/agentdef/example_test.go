package agentdef_test

import (
	"fmt"

	"github.com/holdpoint/holdpoint/service/agentdef"
)

func ExampleParse() {
	d, err := agentdef.Parse([]byte(`---
name: helpdesk
model: googleai/gemini-2.5-flash
holdpoint:
  interrupts:
    - name: confirm
      description: Ask the user to confirm.
      output:
        schema:
          ok: boolean
      expiresAfter: 1h
      onExpire: {ok: false}
---
You are a helpdesk assistant. Use confirm before closing a ticket.
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.Name, d.Model, d.Tools)
	fmt.Println(d.System)
	fmt.Println(string(d.Interrupts[0].Output), d.Interrupts[0].ExpiresAfter)
	// Output:
	// helpdesk googleai/gemini-2.5-flash [confirm]
	// You are a helpdesk assistant. Use confirm before closing a ticket.
	// {"properties":{"ok":{"type":"boolean"}},"required":["ok"],"type":"object"} 1h0m0s
}

func ExampleError() {
	_, err := agentdef.Parse([]byte(`---
model: demo
holdpoint:
  httpTools:
    - name: lookup
      url: /orders
      input: {schema: {id: string}}
      output: {schema: {status: string}}
---
`))
	fmt.Println(err)
	// Output:
	// line 6: holdpoint.httpTools[0].url: must be an absolute http(s) URL
}
