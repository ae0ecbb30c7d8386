package daemon

// NewHTTPServer exposes the HTTP server's settings to the tests.
var NewHTTPServer = newHTTPServer

// Routes lists the patterns Install adds besides the console's.
func (s *Server) Routes() []string {
	var out []string
	for _, r := range s.routes() {
		out = append(out, r.pattern)
	}
	return out
}
