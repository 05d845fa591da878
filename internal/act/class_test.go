package act

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// tool-use-binding §20 defaults, with the variants the doc of DefaultClass promises.
func TestDefaultClass(t *testing.T) {
	for _, tc := range []struct {
		name  string
		want  ConsequenceClass
		known bool
	}{
		// §20 rows, verbatim.
		{"search", ClassInformational, true},
		{"retrieve", ClassInformational, true},
		{"get_weather", ClassInformational, true},
		{"email_send", ClassCommunication, true},
		{"slack_post", ClassCommunication, true},
		{"tweet", ClassCommunication, true},
		{"file_write", ClassPersistentStateChange, true},
		{"db_update", ClassPersistentStateChange, true},
		{"memory_write", ClassPersistentStateChange, true},
		{"ticket_create", ClassPersistentStateChange, true},
		{"payout", ClassFinancial, true},
		{"refund", ClassFinancial, true},
		{"capture", ClassFinancial, true},
		{"wire", ClassFinancial, true},
		{"deploy", ClassNetworkControl, true},
		{"kubectl", ClassNetworkControl, true},
		{"iam_attach", ClassNetworkControl, true},
		{"computer", ClassCommunication, true},
		{"computer_use", ClassCommunication, true},
		{"browser_navigate", ClassCommunication, true},
		{"shell", ClassPersistentStateChange, true},
		{"bash", ClassPersistentStateChange, true},
		// Case and separators.
		{"EmailSend", ClassCommunication, true},
		{"SEND_EMAIL", ClassCommunication, true},
		{"email.send", ClassCommunication, true},
		{"email-send", ClassCommunication, true},
		{"sendEmail", ClassCommunication, true},
		{"Slack.PostMessage", ClassCommunication, true},
		{"IAMAttachPolicy", ClassNetworkControl, true},
		{"repo_deploy", ClassNetworkControl, true},
		{"payout_create", ClassFinancial, true},
		{"Payouts.Create", ClassFinancial, true},
		{"refunds", ClassFinancial, true},
		{"wire_transfer", ClassFinancial, true},
		{"web_search", ClassInformational, true},
		{"searchDocs", ClassInformational, true},
		{"maps_search", ClassInformational, true},
		{"retrieve_documents", ClassInformational, true},
		{"Weather", ClassInformational, true},
		{"write_file", ClassPersistentStateChange, true},
		{"create_ticket", ClassPersistentStateChange, true},
		{"browser_take_screenshot", ClassDataDisclosure, true},
		{"browser_snapshot", ClassDataDisclosure, true},
		{"export_report", ClassDataDisclosure, true},
		// Most severe wins: an informational word does not launder a payout (§20 last line).
		{"search_and_refund", ClassFinancial, true},
		{"search_then_email", ClassCommunication, true},
		{"lookup_and_deploy", ClassNetworkControl, true},
		{"payout_search", ClassFinancial, true},
		// Words, not substrings.
		{"research", ClassPersistentStateChange, false},
		{"wireframe_render", ClassPersistentStateChange, false},
		{"payload_inspect", ClassPersistentStateChange, false},
		{"computer_inventory", ClassPersistentStateChange, false},
		// Unknown: cautious default, never INFORMATIONAL.
		{"frobnicate", ClassPersistentStateChange, false},
		{"", ClassPersistentStateChange, false},
		{"__", ClassPersistentStateChange, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, known := LookupClass(tc.name)
			if got != tc.want || known != tc.known {
				t.Fatalf("LookupClass(%q) = %s,%v want %s,%v", tc.name, got, known, tc.want, tc.known)
			}
			if DefaultClass(tc.name) != got {
				t.Fatal("DefaultClass disagrees with LookupClass")
			}
		})
	}
}

func TestInferActType(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proto ToolProtocol
		want  ActType
	}{
		{"email_send", ProtocolLocalFunction, ActToolCall},
		{"payout_create", ProtocolMCP, ActToolCall},
		{"computer", ProtocolLocalFunction, ActComputerUse},
		{"Computer", ProtocolLocalFunction, ActComputerUse},
		{"computer_20241022", ProtocolLocalFunction, ActComputerUse},
		{"computer-use", ProtocolLocalFunction, ActComputerUse},
		{"computer_inventory", ProtocolLocalFunction, ActToolCall},
		{"browser_click", ProtocolMCP, ActBrowserAction},
		{"memory", ProtocolLocalFunction, ActMemoryWrite},
		{"memory_write", ProtocolLocalFunction, ActMemoryWrite},
		{"save_memory", ProtocolLocalFunction, ActMemoryWrite},
		{"remember", ProtocolLocalFunction, ActMemoryWrite},
		{"memory_search", ProtocolLocalFunction, ActToolCall},
		{"read_memory", ProtocolLocalFunction, ActToolCall},
		{"bash", ProtocolLocalFunction, ActShellAction},
		{"run_shell", ProtocolMCP, ActShellAction},
		{"getOrders", ProtocolHTTPAPI, ActAPIRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := inferActType(tc.name, tc.proto); got != tc.want {
				t.Fatalf("inferActType(%q) = %s, want %s", tc.name, got, tc.want)
			}
		})
	}
}

func TestNameWords(t *testing.T) {
	for in, want := range map[string]string{
		"IAMAttachPolicy":   "iam attach policy",
		"emailSend":         "email send",
		"computer_20250124": "computer 20250124",
		"Slack.PostMessage": "slack post message",
		"a--b":              "a b",
		"ÜberSend":          "über send",
	} {
		got := ""
		for i, w := range nameWords(in) {
			if i > 0 {
				got += " "
			}
			got += w
		}
		if got != want {
			t.Errorf("nameWords(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestASCIINameWordsAgreesWithRunes: the byte fast path splits every ASCII name exactly as the
// rune path does (the class of a tool must not depend on which path ran).
func TestASCIINameWordsAgreesWithRunes(t *testing.T) {
	const alphabet = "abcxyzABCXYZ0189_-. /:"
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 20000; n++ {
		b := make([]byte, rng.IntN(16))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		name := string(b)
		fast, ok := asciiNameWords(nil, name)
		if !ok {
			t.Fatalf("asciiNameWords(%q) refused an ASCII name", name)
		}
		if slow := runeNameWords(name); !slices.Equal(fast, slow) {
			t.Fatalf("asciiNameWords(%q) = %q, runeNameWords = %q", name, fast, slow)
		}
	}
	if _, ok := asciiNameWords(nil, "envoyer_café"); ok {
		t.Fatal("non-ASCII name taken by the ASCII path")
	}
}
