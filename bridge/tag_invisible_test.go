package bridge

import (
	"testing"
	"unicode"
)

// Values are "printable text" (docs/comment-tag.md), shown to admins and
// other users: invisible format characters are refused, as the
// collector's and the policy's names refuse them, so that
// entity=vision-lab<U+200B> cannot pass for entity=vision-lab.
func TestTagRefusesInvisibleCharacters(t *testing.T) {
	for _, v := range []string{"vision-lab\u200b", "vision\u2060-lab", "\ufeffvision-lab", "vision-lab\U000E0041", "vi\u00adsion-lab"} {
		tag, err := ParseTag("gavel: entity=" + v + " model=" + v)
		if err == nil {
			invisible := 0
			for _, r := range tag.Entity {
				if !unicode.IsPrint(r) {
					invisible++
				}
			}
			t.Errorf("entity %q (%d invisible characters) accepted as %+v", v, invisible, tag)
		}
	}
}
