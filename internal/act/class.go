package act

import (
	"encoding/json"
	"strings"
	"unicode"
)

// DefaultClass returns the informative default consequence class of tool-use-binding §20 for a
// tool name; policy may override it. It is decided from the name alone, before enforce()
// (§20: "Hosts SHOULD assign consequence_class before enforce()").
//
// Matching is case-insensitive on the words of the name: "email_send", "EmailSend",
// "send-email", "email.send" and "SendEmail" are all the words {email, send}; a trailing plural
// "s" is ignored ("payouts"). When the words fall in more than one row, the most severe class
// wins, so "search_and_refund" is FINANCIAL: misclassifying payout as INFORMATIONAL is a
// profile failure (§20), over-classifying costs only an escalation.
//
// Severity, most severe first: FINANCIAL, NETWORK_CONTROL, COMMUNICATION, DATA_DISCLOSURE,
// PERSISTENT_STATE_CHANGE, INFORMATIONAL. The §20 rows, with the common variants matched:
//
//	search, retrieve, get_weather          INFORMATIONAL   (+ lookup, retrieval, weather)
//	email_send, slack_post, tweet          COMMUNICATION   (any of email, mail, slack, tweet,
//	                                                        sms, message, chat, send, post, ...)
//	file_write, db_update, memory_write,   PERSISTENT_STATE_CHANGE (write, update, create,
//	ticket_create                                           delete, insert, upsert, ...)
//	payout, refund, capture, wire          FINANCIAL       (+ pay, payment, charge, transfer, ...)
//	deploy, kubectl, iam_attach            NETWORK_CONTROL (§20 allows PERSISTENT_STATE_CHANGE
//	                                                        or NETWORK_CONTROL; the latest draft
//	                                                        puts NETWORK_CONTROL above its
//	                                                        fail-closed threshold, so the
//	                                                        cautious pick is taken)
//	computer_use submit, browser_navigate  COMMUNICATION   (§20: DATA_DISCLOSURE or
//	                                                        COMMUNICATION "depending on the
//	                                                        form"; the name cannot tell the
//	                                                        form, so the more severe; a
//	                                                        screenshot/snapshot is
//	                                                        DATA_DISCLOSURE)
//	shell / bash                           PERSISTENT_STATE_CHANGE ("at least")
//
// A name that matches no row is PERSISTENT_STATE_CHANGE: an unknown tool must be assumed to
// change the world, never INFORMATIONAL (the hot path), and PERSISTENT_STATE_CHANGE is the
// floor the binding itself sets for opaque side-effecting tools (shell/bash) and one of the
// classes the latest draft enforces by default (§19: "Enable enforce() on tools marked
// COMMUNICATION, FINANCIAL, PERSISTENT_STATE_CHANGE"). It is not FINANCIAL because that would
// send every unknown tool to a human and teach operators to rubber-stamp; policy names the
// tools that need more. LookupClass tells whether a row matched.
func DefaultClass(toolName string) ConsequenceClass {
	c, _ := LookupClass(toolName)
	return c
}

// LookupClass is DefaultClass that also reports whether any §20 row matched the name.
func LookupClass(toolName string) (ConsequenceClass, bool) {
	var buf [8]string
	words := nameWordsInto(buf[:0], toolName)
	best, matched := ClassPersistentStateChange, false
	if isComputerFamily(toolName) {
		best, matched = ClassCommunication, true
	}
	if len(words) > 0 && words[0] == "browser" {
		c := ClassCommunication
		if hasAny(words, "screenshot", "snapshot") {
			c = ClassDataDisclosure
		}
		best, matched = c, true
	}
	for _, w := range words {
		c, ok := wordClass(w)
		if !ok {
			continue
		}
		if !matched || severity(c) > severity(best) {
			best = c
		}
		matched = true
	}
	return best, matched
}

func wordClass(w string) (ConsequenceClass, bool) {
	if c, ok := classOfWord(w); ok {
		return c, true
	}
	if len(w) > 3 && strings.HasSuffix(w, "s") {
		return classOfWord(w[:len(w)-1])
	}
	return "", false
}

// classOfWord is the §20 table by word.
func classOfWord(w string) (ConsequenceClass, bool) {
	switch w {
	case "search", "retrieve", "retrieval", "lookup", "weather":
		return ClassInformational, true
	case "email", "mail", "slack", "tweet", "sms", "message", "msg", "chat", "teams", "discord",
		"telegram", "whatsapp", "send", "post", "reply", "forward", "publish", "notify", "dm":
		return ClassCommunication, true
	case "screenshot", "export", "share", "upload":
		return ClassDataDisclosure, true
	case "write", "update", "create", "delete", "remove", "insert", "upsert", "put", "patch",
		"set", "save", "store", "edit", "modify", "append", "rename", "move", "commit", "push",
		"merge", "drop", "truncate", "memory", "remember", "ticket",
		"bash", "shell", "sh", "zsh", "powershell", "terminal", "exec", "execute", "run":
		return ClassPersistentStateChange, true
	case "payout", "refund", "capture", "wire", "pay", "payment", "charge", "transfer",
		"withdraw", "withdrawal", "disburse", "disbursement":
		return ClassFinancial, true
	case "deploy", "deployment", "redeploy", "rollout", "kubectl", "helm", "terraform", "iam",
		"firewall", "dns":
		return ClassNetworkControl, true
	}
	return "", false
}

func severity(c ConsequenceClass) int {
	switch c {
	case ClassFinancial:
		return 6
	case ClassNetworkControl, ClassPhysical:
		return 5
	case ClassCommunication:
		return 4
	case ClassDataDisclosure:
		return 3
	case ClassPersistentStateChange:
		return 2
	case ClassOther:
		return 1
	}
	return 0
}

// nameWords splits a tool name into lowercase words at non-alphanumerics, lower→upper case
// changes ("emailSend"), acronym ends ("IAMAttach" → iam, attach) and letter/digit changes.
func nameWords(name string) []string { return nameWordsInto(nil, name) }

// nameWordsInto is nameWords appending to dst (pass a stack buffer to avoid allocating).
func nameWordsInto(dst []string, name string) []string {
	if w, ok := asciiNameWords(dst, name); ok {
		return w
	}
	return append(dst, runeNameWords(name)...)
}

// runeNameWords is nameWords for any UTF-8 name.
func runeNameWords(name string) []string {
	var words []string
	rs := []rune(name)
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			words = append(words, strings.ToLower(string(rs[start:end])))
		}
		start = -1
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		p := rs[i-1]
		switch {
		case unicode.IsLower(p) && unicode.IsUpper(r):
			flush(i)
			start = i
		case unicode.IsUpper(p) && unicode.IsUpper(r) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
			flush(i)
			start = i
		case unicode.IsDigit(p) != unicode.IsDigit(r):
			flush(i)
			start = i
		}
	}
	flush(len(rs))
	return words
}

// asciiNameWords is nameWords for an ASCII name (every real tool name), on bytes, appending to
// dst: no rune slice, and a word already in lower case is a substring of name, not a copy, so a
// caller's stack buffer makes it allocation-free. It reports false for a name with a non-ASCII
// byte, which nameWords then splits rune by rune with the same rules.
func asciiNameWords(dst []string, name string) ([]string, bool) {
	start := -1
	for i := 0; i <= len(name); i++ {
		split, begin := i == len(name), false
		if !split {
			c := name[i]
			if c >= 0x80 {
				return nil, false
			}
			switch {
			case !asciiLower(c) && !asciiUpper(c) && !asciiDigit(c):
				split = true
			case start < 0:
				start = i
			default:
				p := name[i-1]
				split = asciiLower(p) && asciiUpper(c) ||
					asciiUpper(p) && asciiUpper(c) && i+1 < len(name) && asciiLower(name[i+1]) ||
					asciiDigit(p) != asciiDigit(c)
				begin = split
			}
		}
		if split {
			if start >= 0 && i > start {
				dst = append(dst, strings.ToLower(name[start:i]))
			}
			start = -1
			if begin {
				start = i
			}
		}
	}
	return dst, true
}

func asciiLower(c byte) bool { return 'a' <= c && c <= 'z' }
func asciiUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func asciiDigit(c byte) bool { return '0' <= c && c <= '9' }

func hasAny(words []string, want ...string) bool {
	for _, w := range words {
		for _, x := range want {
			if w == x {
				return true
			}
		}
	}
	return false
}

// isComputerFamily reports whether name is a computer-use tool (tool-use-binding §6, §11:
// "computer_2025xxxx tools → act_type COMPUTER_USE and sink BROWSER_CONTROLLER"). Anthropic's
// computer tool is called "computer" in tool_use blocks; its versioned type
// ("computer_20250124") is accepted as a name too, as are "computer_use" and "computer-use".
// Other "computer_*" names ("computer_inventory") are ordinary tools.
func isComputerFamily(name string) bool {
	var buf [8]string
	w := nameWordsInto(buf[:0], name)
	switch {
	case len(w) == 1 && w[0] == "computer":
		return true
	case len(w) == 2 && w[0] == "computer" && w[1] == "use":
		return true
	case len(w) == 2 && w[0] == "computer" && len(w[1]) == 8 && isDigits(w[1]):
		return true
	}
	return false
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// computerActionClass refines the class of a computer-use act from its input's "action"
// (tool-use-binding §6, latest draft): screenshot and pointer moves MAY be INFORMATIONAL only
// "if they cannot exfiltrate"; the host cannot know what a frame shows, so they are
// DATA_DISCLOSURE. Clicks, typing, keys and anything unrecognised are COMMUNICATION (a submit
// posts a form; policy raises it to FINANCIAL for a bank origin).
func computerActionClass(canonicalArgs []byte) ConsequenceClass {
	var in struct {
		Action string `json:"action"`
	}
	if json.Unmarshal(canonicalArgs, &in) != nil {
		return ClassCommunication
	}
	switch in.Action {
	case "screenshot", "cursor_position", "mouse_move", "zoom":
		return ClassDataDisclosure
	}
	return ClassCommunication
}

// inferActType picks act_type from the tool name and protocol. tool-use-binding §11 maps every
// vendor block to TOOL_CALL except: the computer-use family (COMPUTER_USE, §6), browser tools
// (BROWSER_ACTION, §6), memory writes (MEMORY_WRITE: §21 says a host MUST treat them so),
// shells (SHELL_ACTION) and HTTP API actions (API_REQUEST, §7 "GPT Actions that HTTP POST to a
// customer API are API_REQUEST acts").
func inferActType(name string, proto ToolProtocol) ActType {
	var buf [8]string
	w := nameWordsInto(buf[:0], name)
	switch {
	case isComputerFamily(name):
		return ActComputerUse
	case len(w) > 0 && w[0] == "browser":
		return ActBrowserAction
	case isMemoryWrite(w):
		return ActMemoryWrite
	case hasAny(w, "bash", "shell", "sh", "zsh", "powershell", "terminal"):
		return ActShellAction
	case proto == ProtocolHTTPAPI:
		return ActAPIRequest
	}
	return ActToolCall
}

// isMemoryWrite: a name about memory that is not purely a read ("memory", "memory_write",
// "save_memory", "remember"; not "memory_search" or "read_memory"). Anthropic's memory tool is
// one tool for reads and writes, so "memory" alone counts as a write.
func isMemoryWrite(w []string) bool {
	if hasAny(w, "remember") {
		return true
	}
	if !hasAny(w, "memory", "memories") {
		return false
	}
	reads := hasAny(w, "read", "get", "list", "search", "view", "fetch", "retrieve", "lookup", "query", "recall")
	writes := hasAny(w, "write", "save", "store", "add", "update", "create", "insert", "set", "put", "append", "delete", "remove", "edit")
	return writes || !reads
}

// sinkTypeFor: computer-use and browser acts go to the controller that issues the events
// (tool-use-binding §6, §11); everything else to tool dispatch.
func sinkTypeFor(t ActType) SinkType {
	if t == ActComputerUse || t == ActBrowserAction {
		return SinkBrowserController
	}
	return SinkToolDispatch
}
