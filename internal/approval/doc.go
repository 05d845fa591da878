// Package approval is the in-cluster approval service (`actgate-controlplane approval`): the
// binding-moment page of internal/console served over the network to principals who sign in
// with OpenID Connect, so a person without a kubeconfig can resolve the moments addressed to
// them from a notification's link (docs/security.md "The approval service").
//
// The service holds no authority over BindingMoments. A person signs in with the Authorization
// Code flow and PKCE (S256) at the configured issuer; state and nonce are checked, the state
// is bound to the browser by a short-lived login cookie, and pending logins are bounded in
// number and age. The verified ID token is kept in a server-side session (bounded in total,
// lifetime --session-lifetime and never beyond the token's expiry) named by the
// __Host-actgate-session cookie (Secure, HttpOnly, SameSite=Strict, Path=/). Every read and
// every resolution is made with that ID token as the bearer token to the kube-apiserver, which
// trusts the same issuer (structured authentication configuration): RBAC and the
// BindingMoment admission webhook judge the person, who must be the moment's principal, and
// the service's own ServiceAccount has no RBAC on actgate.io at all.
//
// Every POST carries the session's anti-CSRF token and an Origin equal to --external-url's;
// every request's Host must be --external-url's host. Resolving a moment of a consequential
// class (FINANCIAL, PHYSICAL, NETWORK_CONTROL by default, or a moment whose class cannot be
// read) needs an authentication no older than --step-up-max-age: an older one is sent back
// to sign in with max_age, and the moment's deep link (BASE/#moment-NAMESPACE/NAME) is kept
// across the sign-in as a validated query parameter and restored in the redirect back.
package approval
