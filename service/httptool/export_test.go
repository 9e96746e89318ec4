package httptool

// CloseIdle closes c's idle connections, so that tests leave no goroutine
// behind.
func CloseIdle(c *Client) { c.closeIdleConnections() }
