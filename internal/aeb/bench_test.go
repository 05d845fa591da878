package aeb

import "testing"

func BenchmarkDecodeCase(b *testing.B) {
	raw := vectorInput(b, "authorized_admission")
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := DecodeCase(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAdmit(b *testing.B) {
	c := admissionCase(func(c *Case) {
		c.Operation.Requirements = []Requirement{humanReq(2)}
		c.Evidence = []Evidence{approval("human:approver:1", 1), approval("human:approver:2", 2)}
	})
	for b.Loop() {
		r, err := Admit(c.Operation, c.Evidence, c.LocalPolicy, c.Reservation, c.EvaluatedAt)
		if err != nil || !r.Admitted() {
			b.Fatal(r, err)
		}
	}
}
