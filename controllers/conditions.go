package controllers

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setCondition sets c on conds, keeping lastTransitionTime when the status did not change and
// stamping now (the reconciler's clock) when it did. Messages are bounded to what the API
// accepts.
func setCondition(conds *[]metav1.Condition, c metav1.Condition, generation int64, now time.Time) {
	c.ObservedGeneration = generation
	c.LastTransitionTime = metav1.NewTime(now)
	c.Message = clip(c.Message, maxConditionMessage)
	meta.SetStatusCondition(conds, c)
}

// maxConditionMessage is metav1.Condition's message bound.
const maxConditionMessage = 32768

// conditionChanged reports whether c differs from the condition of the same type in old in
// status, reason or message.
func conditionChanged(old []metav1.Condition, c *metav1.Condition) bool {
	if c == nil {
		return false
	}
	prev := meta.FindStatusCondition(old, c.Type)
	return prev == nil || prev.Status != c.Status || prev.Reason != c.Reason || prev.Message != c.Message
}
