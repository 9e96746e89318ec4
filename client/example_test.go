package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/holdpoint/holdpoint/client"
)

// The seed flow of the Genkit interrupts guide against a Holdpoint server
// (`make run`, the demo agent bankingAgent): ask for a transfer, read the
// userApproval interrupt, approve it. TestSeedFlowApprove runs the same
// flow against a real server.
func Example() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080" /* client.WithAPIKey(key) without --dev */)
	if err != nil {
		log.Fatal(err)
	}
	chat := c.Agent("bankingAgent").Chat()
	res, err := chat.Send(ctx, "Transfer $50 to account 12345")
	if err != nil {
		log.Fatal(err)
	}
	for _, approval := range res.Interrupts() { // the turn paused on userApproval
		var in struct{ Action, Details string }
		if err := approval.DecodeInput(&in); err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Text(), in.Details)
		res, err = chat.Resume(ctx, approval.Respond(map[string]any{"approved": true}))
		if client.IsConflict(err) {
			log.Fatal("somebody else decided first")
		} else if err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(res.Text())
}

// Streaming a turn: chunks as they come, then the answer.
func ExampleChat_SendStream() {
	ctx := context.Background()
	c, _ := client.New("http://127.0.0.1:8080")
	stream := c.Agent("bankingAgent").Chat().SendStream(ctx, "Prepare my yearly statement")
	for chunk, err := range stream.Chunks() {
		if err != nil {
			log.Fatal(err) // a status such as NOT_FOUND: errors.As(err, &*client.Error)
		}
		fmt.Print(chunk.Text())
	}
	res, _ := stream.Response()
	fmt.Println("\n", res.FinishReason())
}

// Following the approvals inbox live: the iterator reconnects by itself
// and resumes after the last event it yielded.
func ExampleClient_Events() {
	ctx := context.Background()
	c, _ := client.New("http://127.0.0.1:8080", client.WithAPIKey("hp_admin_key"))
	for ev, err := range c.Events(ctx, client.EventsOptions{Types: []string{"interrupt.created"}}) {
		if err != nil {
			log.Fatal(err)
		}
		it, err := c.Interrupt(ctx, ev.InterruptID)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(it.Tool, string(it.Input))
	}
}
