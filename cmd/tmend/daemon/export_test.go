package daemon

// NewHTTPServer exposes the HTTP server's settings to the tests.
var NewHTTPServer = newHTTPServer
