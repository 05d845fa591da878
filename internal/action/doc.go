// Package action builds and digests the action object an option authorises:
// the material shape of EP-TOOL-CALL-BINDING-v1 (DESIGN.md "The action an
// option authorises").
package action
