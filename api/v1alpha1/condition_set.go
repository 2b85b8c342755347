package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SetCondition is the one way banlieue's roles set a condition: c, observed at generation, its
// message made safe and bounded (ConditionMessage), replaces the condition of its type.
// meta.SetStatusCondition keeps lastTransitionTime while the status is unchanged, so a pass that
// changes nothing writes nothing new.
func SetCondition(conditions *[]metav1.Condition, generation int64, c metav1.Condition) {
	c.ObservedGeneration = generation
	c.Message = ConditionMessage(c.Message)
	meta.SetStatusCondition(conditions, c)
}
