package icetable

import "github.com/apache/iceberg-go"

// schemas are the tables' schemas, one per output kind, matching the
// columns the sink writes (docs/reference/messages.md): the Parquet parts carry no
// field ids, so readers map the columns by name (the table's name mapping,
// set on the first append). Every field is optional, so a part that lacks
// a column (samples of unweighted graphs have no edge_weight, walks other
// than temporal ones with with_times have no times) reads as null there.
var schemas = map[string]*iceberg.Schema{
	"walks": iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "walk_id", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "start", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 3, Name: "length", Type: iceberg.PrimitiveTypes.Int32},
		iceberg.NestedField{ID: 4, Name: "walk", Type: &iceberg.ListType{ElementID: 5, Element: iceberg.PrimitiveTypes.Int64}},
		iceberg.NestedField{ID: 6, Name: "times", Type: &iceberg.ListType{ElementID: 7, Element: iceberg.PrimitiveTypes.Int64}},
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
