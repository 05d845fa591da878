package main

import (
	"fmt"
	"os"
	"strings"
)

// The envelope digest of the worked example in envelope-04 §6.4:
//
//	actgate envelope digest < testdata/envelope/example.json
func Example_envelopeDigest() {
	f, err := os.Open("../../testdata/envelope/example.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	status := run([]string{"envelope", "digest"}, f, os.Stdout, os.Stdout)
	fmt.Println("exit", status)
	// Output:
	// sha256:0db384ab1b682c115d79babfefa91f014ad80c007d00c79119d748f32be232d1
	// exit 0
}

// A resolution is authority only for the action its selected option names; a decline
// authorises nothing and says so:
//
//	actgate resolution check --envelope testdata/envelope/payment.json \
//	    --action testdata/envelope/payment.action.json < testdata/envelope/payment.resolution.json
func Example_resolutionCheck() {
	args := []string{"resolution", "check",
		"--envelope", "../../testdata/envelope/payment.json",
		"--action", "../../testdata/envelope/payment.action.json"}
	res, err := os.Open("../../testdata/envelope/payment.resolution.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Close()
	fmt.Println("exit", run(args, res, os.Stdout, os.Stdout))

	declined := `{"binding_moment_resolution":{"envelope_digest":"sha256:349bdd5fa33ebe42b809d6f4f98ef1c2eceae7511cac16d9bf36e354f2b54934","resolution":"declined"}}`
	fmt.Println("exit", run(args, strings.NewReader(declined), os.Stdout, os.Stdout))
	// Output:
	// authority option 0 action sha256:d0dfcc51d63932b0ca708ba87af799a97cc963d404d63e459c5fab9498845174 envelope sha256:349bdd5fa33ebe42b809d6f4f98ef1c2eceae7511cac16d9bf36e354f2b54934
	// exit 0
	// RES_NOT_AUTHORITY $.binding_moment_resolution.resolution: the resolution is "declined"; only an option resolution authorises an action (§7.3)
	// exit 3
}
