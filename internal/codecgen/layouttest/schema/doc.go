// Package schema holds the types whose binary codec package layouttest
// generates: fields of several layouts, a legacy type, a skimmed field.
package schema
