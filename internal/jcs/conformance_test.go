package jcs

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gowebpki "github.com/gowebpki/jcs"
)

const conformanceDir = "testdata/conformance"

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCyberphoneVectors checks the RFC 8785 reference vectors: Full mode
// must reproduce output/ byte for byte (and outhex/ agrees with output/).
// Strict mode must either give the same bytes or, for values.json, which
// carries non-integers, reject with JCS_NUMBER_OUT_OF_PROFILE.
func TestCyberphoneVectors(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join(conformanceDir, "cyberphone", "input", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) != 6 {
		t.Fatalf("found %d cyberphone inputs, want 6", len(inputs))
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			raw := readFile(t, in)
			want := readFile(t, filepath.Join(conformanceDir, "cyberphone", "output", name+".json"))
			hexText := readFile(t, filepath.Join(conformanceDir, "cyberphone", "outhex", name+".txt"))
			wantHex, err := hex.DecodeString(strings.Join(strings.Fields(string(hexText)), ""))
			if err != nil {
				t.Fatalf("outhex: %v", err)
			}
			if !bytes.Equal(want, wantHex) {
				t.Fatalf("output/%s.json and outhex/%s.txt disagree", name, name)
			}

			got, err := Canonicalize(raw, Full)
			if err != nil {
				t.Fatalf("Full: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Full:\n got %s\nwant %s", got, want)
			}

			strict, err := Canonicalize(raw, Strict)
			if name == "values" {
				if code, _ := CodeOf(err); code != CodeNumberOutOfProfile {
					t.Fatalf("Strict: got %v, want %s", err, CodeNumberOutOfProfile)
				}
				return
			}
			if err != nil {
				t.Fatalf("Strict: %v", err)
			}
			if !bytes.Equal(strict, want) {
				t.Fatalf("Strict:\n got %s\nwant %s", strict, want)
			}
		})
	}
}

// TestES6NumberFile checks every line of the first 1,000 lines of the ES6
// number-serialisation file (hex-ieee754,expected), three ways: the
// formatter directly, gowebpki's NumberToJSON (so the two cannot drift
// apart), and Canonicalize in Full mode over two different spellings of
// the same double.
func TestES6NumberFile(t *testing.T) {
	path := filepath.Join(conformanceDir, "es6testfile1k.txt")
	raw := readFile(t, path)
	const wantSum = "be18b62b6f69cdab33a7e0dae0d9cfa869fda80ddc712221570f9f40a5878687"
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != wantSum {
		t.Fatalf("%s has been altered: sha256 %x, want %s", path, sum, wantSum)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	lines := 0
	for sc.Scan() {
		lines++
		hexBits, want, ok := strings.Cut(sc.Text(), ",")
		if !ok {
			t.Fatalf("line %d: malformed %q", lines, sc.Text())
		}
		bits, err := strconv.ParseUint(hexBits, 16, 64)
		if err != nil {
			t.Fatalf("line %d: %v", lines, err)
		}
		f := math.Float64frombits(bits)

		if got := string(appendES6(nil, f)); got != want {
			t.Errorf("line %d (%s): appendES6 = %s, want %s", lines, hexBits, got, want)
		}
		if got, err := gowebpki.NumberToJSON(f); err != nil || got != want {
			t.Errorf("line %d (%s): gowebpki.NumberToJSON = %s, %v, want %s", lines, hexBits, got, err, want)
		}
		for _, spelling := range []string{want, strconv.FormatFloat(f, 'e', -1, 64), strconv.FormatFloat(f, 'E', 20, 64)} {
			got, err := Canonicalize([]byte(spelling), Full)
			if err != nil || string(got) != want {
				t.Errorf("line %d (%s): Canonicalize(%s, Full) = %s, %v, want %s", lines, hexBits, spelling, got, err, want)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines != 1000 {
		t.Fatalf("read %d lines, want 1000", lines)
	}
}

type epVector struct {
	ID     string `json:"id"`
	Expect struct {
		Valid bool `json:"valid"`
	} `json:"expect"`
	Canonicalization struct {
		InputJSON      string `json:"input_json"`
		ExpectedDigest string `json:"expected_digest"`
	} `json:"canonicalization"`
}

func loadEPVectors(t testing.TB) []epVector {
	t.Helper()
	var suite struct {
		Suite   string     `json:"suite"`
		Count   int        `json:"count"`
		Vectors []epVector `json:"vectors"`
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(conformanceDir, "ep-canonicalization.v1.json")), &suite); err != nil {
		t.Fatal(err)
	}
	if suite.Suite != "EP-CANONICALIZATION-v1" || suite.Count != 35 || len(suite.Vectors) != 35 {
		t.Fatalf("unexpected suite %q with %d/%d vectors", suite.Suite, suite.Count, len(suite.Vectors))
	}
	return suite.Vectors
}

// epRejectCode is the code this package gives each rejecting vector. The
// suite pins only accept/reject; the codes are ours.
var epRejectCode = map[string]Code{
	"reject_duplicate_key_literal":          CodeDuplicateMember,
	"reject_duplicate_key_escape_alias":     CodeDuplicateMember,
	"reject_duplicate_key_nested":           CodeDuplicateMember,
	"reject_duplicate_key_non_bmp_alias":    CodeDuplicateMember,
	"reject_lone_high_surrogate":            CodeUnpairedSurrogate,
	"reject_lone_low_surrogate":             CodeUnpairedSurrogate,
	"reject_reversed_surrogate_pair":        CodeUnpairedSurrogate,
	"reject_high_surrogate_then_bmp_escape": CodeUnpairedSurrogate,
	"reject_lone_surrogate_in_member_name":  CodeUnpairedSurrogate,
	"reject_unsafe_integer_2_53":            CodeNumberOutOfProfile,
	"reject_unsafe_large_exponent":          CodeNumberOutOfProfile,
	"reject_non_integer_real":               CodeNumberOutOfProfile,
	"reject_nested_depth_over_limit":        CodeDepthExceeded,
}

// fullOnly is what Full mode gives for the vectors Strict rejects only for
// being outside the profile (envelope-04 §6.3): RFC 8785 output.
var fullOnly = map[string]string{
	"reject_unsafe_integer_2_53":   `{"n":9007199254740992}`,
	"reject_unsafe_large_exponent": `{"n":1e+21}`,
	"reject_non_integer_real":      `{"n":1.5}`,
}

// TestEPCanonicalizationVectors runs all 35 EP-CANONICALIZATION-v1 vectors
// in Strict mode (envelope-04 §6.3 adopts EP receipts §13.12 "without
// variation") and pins what Full mode does with each.
func TestEPCanonicalizationVectors(t *testing.T) {
	vectors := loadEPVectors(t)
	accepted, rejected := 0, 0
	for _, v := range vectors {
		t.Run(v.ID, func(t *testing.T) {
			in := []byte(v.Canonicalization.InputJSON)
			canon, digest, err := CanonicalDigest(in, Strict)
			full, fullErr := Canonicalize(in, Full)
			if v.Expect.Valid {
				accepted++
				if err != nil {
					t.Fatalf("Strict rejected a valid vector: %v", err)
				}
				if want := DigestPrefix + v.Canonicalization.ExpectedDigest; digest != want {
					t.Fatalf("digest %s, want %s (canonical %s)", digest, want, canon)
				}
				if fullErr != nil || !bytes.Equal(full, canon) {
					t.Fatalf("Full = %s, %v; want the Strict bytes %s", full, fullErr, canon)
				}
				return
			}
			rejected++
			if err == nil {
				t.Fatalf("Strict accepted an invalid vector: %s", canon)
			}
			want, ok := epRejectCode[v.ID]
			if !ok {
				t.Fatalf("no expected code recorded for %s (got %v)", v.ID, err)
			}
			if code, _ := CodeOf(err); code != want {
				t.Fatalf("Strict: got %v, want code %s", err, want)
			}
			switch {
			case v.ID == "reject_nested_depth_over_limit":
				if fullErr != nil {
					t.Fatalf("Full rejected depth 65 (bound is %d): %v", MaxDepthFull, fullErr)
				}
			case fullOnly[v.ID] != "":
				if fullErr != nil || string(full) != fullOnly[v.ID] {
					t.Fatalf("Full = %s, %v; want %s", full, fullErr, fullOnly[v.ID])
				}
			default:
				// Duplicates and unpaired surrogates are not I-JSON, which
				// RFC 8785 §3.1 requires: Full rejects them identically.
				if code, _ := CodeOf(fullErr); code != want {
					t.Fatalf("Full: got %v, want code %s", fullErr, want)
				}
			}
		})
	}
	if accepted != 22 || rejected != 13 {
		t.Fatalf("ran %d accepting and %d rejecting vectors, want 22 and 13", accepted, rejected)
	}
}

// TestEnvelopeExample checks the worked example of envelope-04 §6.4: the
// printed action and envelope digests, the 895-byte length, that the
// canonical form is a fixed point, and that a pretty-printed rendering of
// it canonicalizes back to the same bytes.
func TestEnvelopeExample(t *testing.T) {
	cases := []struct {
		file, digest string
		size         int
	}{
		{"action_a.canonical.json", "sha256:ff91e3166e64b892004d4b43b05ad6ed7ff0819463da80c72f27f47039c033fa", 0},
		{"action_b.canonical.json", "sha256:49be14ae6e74b950c0c7b790fa22538d45fb4853bb0f3b242b28204bee232945", 0},
		{"envelope.canonical.json", "sha256:0db384ab1b682c115d79babfefa91f014ad80c007d00c79119d748f32be232d1", 895},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			raw := readFile(t, filepath.Join(conformanceDir, tc.file))
			if tc.size != 0 && len(raw) != tc.size {
				t.Fatalf("%d bytes, want %d", len(raw), tc.size)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, raw, "", "    "); err != nil {
				t.Fatal(err)
			}
			for _, in := range [][]byte{raw, pretty.Bytes()} {
				for _, mode := range []Mode{Strict, Full} {
					canon, digest, err := CanonicalDigest(in, mode)
					if err != nil {
						t.Fatalf("%v: %v", mode, err)
					}
					if !bytes.Equal(canon, raw) {
						t.Fatalf("%v: canonical form differs from the file:\n got %s\nwant %s", mode, canon, raw)
					}
					if digest != tc.digest {
						t.Fatalf("%v: digest %s, want %s", mode, digest, tc.digest)
					}
				}
			}
		})
	}
}

// TestES6Formatter cross-checks appendES6 against gowebpki's NumberToJSON
// on values the 1k file may not reach.
func TestES6Formatter(t *testing.T) {
	var b [8]byte
	seed := sha256.Sum256([]byte("actgate es6"))
	for i := 0; i < 20000; i++ {
		if i%4 == 0 {
			seed = sha256.Sum256(seed[:])
		}
		copy(b[:], seed[(i%4)*8:])
		f := math.Float64frombits(binary.LittleEndian.Uint64(b[:]))
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		want, err := gowebpki.NumberToJSON(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(appendES6(nil, f)); got != want {
			t.Fatalf("appendES6(%v) = %s, want %s", f, got, want)
		}
	}
}
