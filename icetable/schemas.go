package icetable

import (
	"slices"

	"github.com/apache/iceberg-go"
)

// schemas are the tables' schemas, one per output kind, matching the
// columns the sink writes (docs/reference/messages.md): the Parquet parts carry no
// field ids, so readers map the columns by name (the table's name mapping,
// set on the first append). Every field is optional, so a part that lacks
// a column (samples of unweighted graphs have no edge_weight) reads as
// null there.
var schemas = map[string]*iceberg.Schema{
	"walks": iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "walk_id", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "start", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 3, Name: "length", Type: iceberg.PrimitiveTypes.Int32},
		iceberg.NestedField{ID: 4, Name: "walk", Type: &iceberg.ListType{ElementID: 5, Element: iceberg.PrimitiveTypes.Int64}},
	),
	"visits": iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "query_id", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 2, Name: "steps", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 3, Name: "candidates", Type: &iceberg.ListType{ElementID: 4, Element: &iceberg.StructType{FieldList: []iceberg.NestedField{
			{ID: 5, Name: "vertex", Type: iceberg.PrimitiveTypes.Int64},
			{ID: 6, Name: "visits", Type: iceberg.PrimitiveTypes.Int64},
			{ID: 7, Name: "score", Type: iceberg.PrimitiveTypes.Float64},
		}}}},
	),
	"samples": iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "instance_id", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "seed", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 3, Name: "hop", Type: iceberg.PrimitiveTypes.Int32},
		iceberg.NestedField{ID: 4, Name: "src", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 5, Name: "dst", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 6, Name: "edge_weight", Type: iceberg.PrimitiveTypes.Float32},
	),
}

// StringIDs is the suffix of the tables of a graph with string ids
// (walks_string, visits_string, samples_string): their vertex columns are
// strings, which no schema evolution turns an integer column into, so they
// are tables of their own.
const StringIDs = "_string"

// stringSchema is schema s with its vertex id columns as strings.
func stringSchema(s *iceberg.Schema, ids ...int) *iceberg.Schema {
	str := func(f iceberg.NestedField) iceberg.NestedField {
		if slices.Contains(ids, f.ID) {
			f.Type = iceberg.PrimitiveTypes.String
		}
		return f
	}
	var fields []iceberg.NestedField
	for _, f := range s.Fields() {
		switch t := f.Type.(type) {
		case *iceberg.ListType:
			l := *t
			if st, ok := l.Element.(*iceberg.StructType); ok {
				s := &iceberg.StructType{}
				for _, sf := range st.FieldList {
					s.FieldList = append(s.FieldList, str(sf))
				}
				l.Element = s
			} else if slices.Contains(ids, l.ElementID) {
				l.Element = iceberg.PrimitiveTypes.String
			}
			f.Type = &l
		default:
			f = str(f)
		}
		fields = append(fields, f)
	}
	return iceberg.NewSchema(0, fields...)
}

func init() {
	// Field ids of the vertex columns: walks' start and walk element,
	// visits' candidate vertex, samples' seed, src and dst.
	schemas["walks"+StringIDs] = stringSchema(schemas["walks"], 2, 5)
	schemas["visits"+StringIDs] = stringSchema(schemas["visits"], 5)
	schemas["samples"+StringIDs] = stringSchema(schemas["samples"], 2, 4, 5)
}
