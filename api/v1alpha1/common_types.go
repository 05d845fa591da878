package v1alpha1

// ConsequenceClass is the consequence class of an AgentCandidateAct, copied from the
// AgentCandidateAct schema (tool-use-binding §10, `consequence_class`) in its wire spelling.
// Informative defaults for common tools are in tool-use-binding §20; misclassifying a payout as
// INFORMATIONAL is a profile failure, so policies name the class of every high-consequence tool.
// +kubebuilder:validation:Enum=INFORMATIONAL;DATA_DISCLOSURE;PERSISTENT_STATE_CHANGE;FINANCIAL;NETWORK_CONTROL;PHYSICAL;COMMUNICATION;OTHER
type ConsequenceClass string

// The consequence classes of tool-use-binding §10.
const (
	// ConsequenceInformational reads without side effects (search, retrieve, get_weather).
	ConsequenceInformational ConsequenceClass = "INFORMATIONAL"
	// ConsequenceDataDisclosure releases data to another party (a form submit, a navigation to a
	// new origin carrying data).
	ConsequenceDataDisclosure ConsequenceClass = "DATA_DISCLOSURE"
	// ConsequencePersistentStateChange writes durable state (file_write, db_update, memory_write,
	// ticket_create, deploy; shell at least this).
	ConsequencePersistentStateChange ConsequenceClass = "PERSISTENT_STATE_CHANGE"
	// ConsequenceFinancial moves money (payout, refund, capture, wire).
	ConsequenceFinancial ConsequenceClass = "FINANCIAL"
	// ConsequenceNetworkControl changes who can reach what (iam_attach, firewall rules).
	ConsequenceNetworkControl ConsequenceClass = "NETWORK_CONTROL"
	// ConsequencePhysical actuates something in the physical world.
	ConsequencePhysical ConsequenceClass = "PHYSICAL"
	// ConsequenceCommunication sends a message on someone's behalf (email_send, slack_post).
	ConsequenceCommunication ConsequenceClass = "COMMUNICATION"
	// ConsequenceOther is anything else; treat as high consequence.
	ConsequenceOther ConsequenceClass = "OTHER"
)

// ConsequenceClasses lists every ConsequenceClass in schema order.
func ConsequenceClasses() []ConsequenceClass {
	return []ConsequenceClass{
		ConsequenceInformational, ConsequenceDataDisclosure, ConsequencePersistentStateChange,
		ConsequenceFinancial, ConsequenceNetworkControl, ConsequencePhysical,
		ConsequenceCommunication, ConsequenceOther,
	}
}

// Digest is a SHA-256 digest in the one string form actgate shows everywhere: "sha256:" followed
// by 64 lowercase hexadecimal characters (binding-moment-envelope-04 §6.2).
// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
// +kubebuilder:validation:MinLength=71
// +kubebuilder:validation:MaxLength=71
type Digest string

// SecretKeyRef names one key of a Secret in the namespace of the object that holds the reference.
type SecretKeyRef struct {
	// name is the name of the Secret, in the same namespace as the referring object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`

	// key is the key within the Secret's data whose value is used.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// LocalObjectReference names an object of a kind known from context in the same namespace.
type LocalObjectReference struct {
	// name is the name of the referenced object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`
}
