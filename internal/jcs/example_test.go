package jcs_test

import (
	"fmt"

	"github.com/actgate/actgate/internal/jcs"
)

func ExampleCanonicalDigest() {
	canonical, digest, err := jcs.CanonicalDigest([]byte(`{ "recipient": "booking.example", "disclose": ["travel_dates"] }`), jcs.Strict)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(canonical))
	fmt.Println(digest)
	// Output:
	// {"disclose":["travel_dates"],"recipient":"booking.example"}
	// sha256:ff91e3166e64b892004d4b43b05ad6ed7ff0819463da80c72f27f47039c033fa
}

func ExampleCanonicalize_strictProfile() {
	for _, in := range []string{`{"n":1.0}`, `{"n":1.5}`, `{"a":1,"\u0061":2}`} {
		out, err := jcs.Canonicalize([]byte(in), jcs.Strict)
		if code, ok := jcs.CodeOf(err); ok {
			fmt.Println(in, "->", code)
			continue
		}
		fmt.Println(in, "->", string(out))
	}
	// Output:
	// {"n":1.0} -> {"n":1}
	// {"n":1.5} -> JCS_NUMBER_OUT_OF_PROFILE
	// {"a":1,"\u0061":2} -> JCS_DUPLICATE_MEMBER
}
