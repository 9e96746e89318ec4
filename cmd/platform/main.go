package main

import "github.com/holdpoint/holdpoint/cmd/platform/app"

func main() {
	// The platform with the built-in demo agents (under --dev or --demo).
	app.Main(app.Platform{Demo: true})
}
