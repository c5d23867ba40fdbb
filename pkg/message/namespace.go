package message

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

// OtherNamespace is how text a tenant reads names a workload of another namespace. Upstream
// Kueue names other teams' workloads by UID only, so that sharing a ClusterQueue tells nothing
// of the other teams' work; our messages name them by no more.
const OtherNamespace = annotations.OtherNamespaceWorkload

// ForNamespace returns text, written for a reader of namespace ns, with every workload key
// ("namespace/name", as klog.KObj prints it) of another namespace replaced by OtherNamespace. A
// key is a token of namespace and name characters (a DNS label, a slash, a DNS subdomain) whose
// namespace part is not ns; a resource name such as nvidia.com/gpu has a dot before its slash,
// and a ratio such as 1/2 no letter: neither is a key. Text for the admin (logs, ClusterQueue views) is not passed through it.
func ForNamespace(text, ns string) string {
	if !strings.Contains(text, "/") {
		return text
	}
	var b strings.Builder
	rest := text
	for len(rest) > 0 {
		i := strings.IndexFunc(rest, isNameChar)
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		rest = rest[i:]
		j := strings.IndexFunc(rest, func(r rune) bool { return !isNameChar(r) })
		if j < 0 {
			j = len(rest)
		}
		token := rest[:j]
		rest = rest[j:]
		// A sentence may end right after a key.
		trimmed := strings.TrimRight(token, ".")
		if otherNamespaceKey(trimmed, ns) {
			b.WriteString(OtherNamespace)
			b.WriteString(token[len(trimmed):])
			continue
		}
		b.WriteString(token)
	}
	return b.String()
}

func isNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '/'
}

// otherNamespaceKey reports whether token is a workload key of a namespace other than ns.
func otherNamespaceKey(token, ns string) bool {
	keyNS, name, ok := strings.Cut(token, "/")
	if !ok || keyNS == ns || strings.Contains(name, "/") {
		return false
	}
	// A ratio such as 1/2 has no letter.
	if !strings.ContainsFunc(token, func(r rune) bool { return r >= 'a' && r <= 'z' }) {
		return false
	}
	return len(validation.IsDNS1123Label(keyNS)) == 0 && len(validation.IsDNS1123Subdomain(name)) == 0
}
