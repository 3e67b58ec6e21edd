module github.com/ddbsession/ddbsession/bench

go 1.26.0

require (
	github.com/alexedwards/scs/v2 v2.9.0
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/aws-sdk-go-v2/credentials v1.21.0
	github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue v1.21.21
	github.com/aws/aws-sdk-go-v2/service/dynamodb v1.74.0
	github.com/ddbsession/ddbsession v0.1.0
	github.com/ddbsession/ddbsession/mcpsession v0.1.0
	github.com/ddbsession/ddbsession/scsstore v0.1.0
	github.com/google/go-cmp v0.7.0
	github.com/mark3labs/mcp-go v1.2.1
)

require (
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/dynamodbstreams v1.47.0 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/accept-encoding v1.13.25 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/endpoint-discovery v1.13.12 // indirect
	github.com/aws/smithy-go v1.28.9 // indirect
	github.com/google/jsonschema-go v0.4.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.2 // indirect
	github.com/spf13/cast v1.7.1 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	golang.org/x/text v0.14.0 // indirect
)

// Build against this checkout's copies of the project's modules, so that
// the program runs the code beside it; the requirements above are the
// releases they are published as.
replace github.com/ddbsession/ddbsession => ../

replace github.com/ddbsession/ddbsession/scsstore => ../scsstore

replace github.com/ddbsession/ddbsession/mcpsession => ../mcpsession

replace github.com/ddbsession/ddbsession/ddbstream => ../ddbstream
