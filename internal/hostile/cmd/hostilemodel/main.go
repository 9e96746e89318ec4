// Command hostilemodel serves the attacker's model of package hostile on
// a loopback address, for tests in other languages (tests/compat):
//
//	hostilemodel --addr 127.0.0.1:9090   # then OPENAI_BASE_URL=http://127.0.0.1:9090/v1
package main

import (
	"flag"
	"log"
	"net/http"
	"strings"

	"github.com/holdpoint/holdpoint/internal/hostile"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9090", "loopback address to listen on")
	flag.Parse()
	if !strings.HasPrefix(*addr, "127.") && !strings.HasPrefix(*addr, "localhost:") {
		log.Fatal("hostilemodel: listen on a loopback address only")
	}
	log.Printf("hostilemodel: listening on http://%s", *addr)
	log.Fatal(http.ListenAndServe(*addr, &hostile.Model{}))
}
