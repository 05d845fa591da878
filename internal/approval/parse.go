package approval

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// randomIDBytes is the size of every random identifier the service hands out (session ids,
// login states, nonces, anti-CSRF tokens): 32 bytes, base64url without padding (43 chars).
const randomIDBytes = 32

// randomIDLen is the length of a random identifier's text.
var randomIDLen = base64.RawURLEncoding.EncodedLen(randomIDBytes)

// errBadID: a cookie, state or token that is not one of the service's identifiers.
var errBadID = errors.New("not an identifier this service issues")

// parseID checks that s has the form of an identifier the service hands out (43 characters of
// base64url, decoding to 32 bytes) before it is looked up. It reads untrusted bytes: a
// cookie's value, the state the provider sends back, a form's token.
func parseID(s string) (string, error) {
	if len(s) != randomIDLen {
		return "", errBadID
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != randomIDBytes {
		return "", errBadID
	}
	return s, nil
}

// errBadMoment: a deep link's moment is not NAMESPACE/NAME or NAME.
var errBadMoment = errors.New("not a binding moment's NAMESPACE/NAME or NAME")

// maxMomentRef bounds a NAMESPACE/NAME: a DNS label, a slash and a DNS subdomain.
const maxMomentRef = validation.DNS1123LabelMaxLength + 1 + validation.DNS1123SubdomainMaxLength

// parseMomentRef reads a deep link's moment (what follows "#moment-" in an announcement's
// link): NAMESPACE/NAME, a namespace that is a DNS-1123 label and a BindingMoment name that is
// a DNS-1123 subdomain, or a NAME alone (the standalone gate's "bm-" ids; ns is then ""). It
// reads untrusted bytes (the login's query, a form's moment field), and anything else is
// refused, so what the service puts back into a redirect is always one or two plain names.
func parseMomentRef(s string) (ns, name string, err error) {
	if len(s) > maxMomentRef {
		return "", "", errBadMoment
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		ns, name = "", s
	} else if len(validation.IsDNS1123Label(ns)) != 0 {
		return "", "", errBadMoment
	}
	if len(validation.IsDNS1123Subdomain(name)) != 0 {
		return "", "", errBadMoment
	}
	return ns, name, nil
}

// momentFragment is the page's fragment for a moment: the section's id (internal/console
// momentView.Anchor).
func momentFragment(ref string) string {
	if ref == "" {
		return ""
	}
	return "#moment-" + ref
}

// parseClasses reads --step-up-classes: consequence class names, upper case, unique.
func parseClasses(in []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, c := range in {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		for _, r := range c {
			if (r < 'A' || r > 'Z') && r != '_' {
				return nil, fmt.Errorf("%q is not a consequence class (upper-case letters and _)", c)
			}
		}
		out[c] = true
	}
	return out, nil
}
