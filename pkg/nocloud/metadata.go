package nocloud

import (
	"fmt"
	"regexp"
	"unicode/utf8"
)

// maxIdentifierLen is the DNS name limit, ample for a UUID or a Kubernetes
// name.
const maxIdentifierLen = 253

// typedScalar matches the plain scalars of the identifier character set that
// a YAML 1.1 parser (cloud-init's PyYAML) or a YAML 1.2 core-schema parser
// would resolve to something other than a string: booleans and null,
// integers in any base, floats and dates. Colons, plus signs and spaces,
// which the remaining YAML 1.1 forms need, are already excluded.
var typedScalar = regexp.MustCompile(`^(?:(?i:y|n|yes|no|true|false|on|off|null)` +
	`|0b[01_]+|0o[0-7]+|0x[0-9a-fA-F_]+` +
	`|[0-9][0-9_]*(?:\.[0-9._]*)?(?:[eE]-?[0-9]+)?` +
	`|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2})$`)

// MetaData renders the meta-data file. It does not validate s; Build does.
func (s Seed) MetaData() []byte {
	return []byte("instance-id: " + s.InstanceID + "\nlocal-hostname: " + s.Hostname + "\n")
}

// checkIdentifier enforces the rules the package doc gives for values
// written unquoted into meta-data.
func checkIdentifier(field, v string) error {
	if v == "" {
		return fmt.Errorf("nocloud: %s is empty", field)
	}
	if len(v) > maxIdentifierLen {
		return fmt.Errorf("nocloud: %s is %d bytes, more than %d", field, len(v), maxIdentifierLen)
	}
	for i, r := range v {
		if r >= utf8.RuneSelf || !isAlnum(byte(r)) && (i == 0 || r != '.' && r != '_' && r != '-') {
			return fmt.Errorf("nocloud: %s %q has %q at byte %d; only letters, digits, '.', '_' and '-' are allowed, starting with a letter or digit", field, v, r, i)
		}
	}
	if typedScalar.MatchString(v) {
		return fmt.Errorf("nocloud: %s %q would be read by YAML as a boolean, null, number or date, not a string", field, v)
	}
	return nil
}
