package action_test

import (
	"encoding/json"
	"fmt"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/jcs"
)

func ExampleDigest() {
	args := json.RawMessage(`{"memo":"invoice 7781","amount_usd":4000,"beneficiary":"vendor@example.com"}`)
	digest, err := action.Digest("payment.release", args, jcs.Strict)
	if err != nil {
		panic(err)
	}
	fmt.Println(digest)

	_, err = action.Digest("ledger.post", json.RawMessage(`{"rate":1.5}`), jcs.Strict)
	code, _ := action.CodeOf(err)
	fmt.Println(code)
	// Output:
	// sha256:d0dfcc51d63932b0ca708ba87af799a97cc963d404d63e459c5fab9498845174
	// ACTION_OUT_OF_PROFILE
}
