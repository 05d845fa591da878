package approval

import (
	"bytes"
	"net/http"
)

// landingPage is the service's one page besides the console's: the landing page, the
// signed-in and signed-out notices and the error pages. Only the landing page loads the
// script (static/approval.js) that goes on to sign in; the signed-in notice moves on to the
// page by a meta refresh, a navigation of the service's own origin.
const landingPage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
{{- if eq .Kind "signed-in"}}<meta http-equiv="refresh" content="0;url={{.Link}}">{{end}}
<title>actgate approval service</title><link rel="stylesheet" href="/static/console.css">
{{- if eq .Kind "landing"}}<script src="/static/approval.js"></script>{{end}}
</head><body><header class="top"><h1>Binding moments</h1><p class="who">actgate approval service</p></header>
<main><p data-testid="notice" data-kind="{{.Kind}}">{{.Message}}</p>
{{- if .Link}}<p><a href="{{.Link}}" data-testid="notice-link">{{.LinkText}}</a></p>{{end}}</main></body></html>
`

// notice writes the notice page: kind (landing, signed-in, signed-out, error), a message, and
// a link.
func (s *Service) notice(w http.ResponseWriter, status int, kind, message, linkText, link string) {
	var b bytes.Buffer
	if err := s.landing.Execute(&b, struct{ Kind, Message, LinkText, Link string }{kind, message, linkText, link}); err != nil {
		http.Error(w, message, status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}
