package ddbtest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/config"
)

// isolationChildEnv marks the copy of this test binary that
// TestMainReplacesAWSSettings starts.
const isolationChildEnv = "DDBTEST_ISOLATION_CHILD"

// TestMainReplacesAWSSettings runs this test binary again with a
// developer's AWS settings in its environment (keys, session token,
// profile, region, shared files that hold that profile), and checks there
// that, after Main, the SDK's configuration yields only the dummy ones.
func TestMainReplacesAWSSettings(t *testing.T) {
	if os.Getenv(isolationChildEnv) != "" {
		checkDummyAWSConfig(t)
		return
	}
	t.Parallel()
	dir := t.TempDir()
	configFile := filepath.Join(dir, "config")
	credentialsFile := filepath.Join(dir, "credentials")
	writeFile(t, configFile, "[profile production]\nregion = eu-west-1\n")
	writeFile(t, credentialsFile, "[production]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")

	cmd := exec.Command(os.Args[0], "-test.run=^TestMainReplacesAWSSettings$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(),
		isolationChildEnv+"=1",
		"AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
		"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"AWS_SESSION_TOKEN=IQoJb3JpZ2luX2VjEXAMPLETOKEN",
		"AWS_PROFILE=production",
		"AWS_DEFAULT_PROFILE=production",
		"AWS_REGION=eu-west-1",
		"AWS_CONFIG_FILE="+configFile,
		"AWS_SHARED_CREDENTIALS_FILE="+credentialsFile,
		"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true",
	)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestMainReplacesAWSSettings") {
		t.Fatalf("the child with a developer's AWS settings: %v\n%s", err, out)
	}
}

// checkDummyAWSConfig is the child's half: what an app would load.
func checkDummyAWSConfig(t *testing.T) {
	for _, name := range []string{"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"} {
		if v, ok := os.LookupEnv(name); ok {
			t.Errorf("%s=%q after Main, want it unset", name, v)
		}
	}
	for _, name := range []string{"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"} {
		if _, err := os.Stat(os.Getenv(name)); !os.IsNotExist(err) {
			t.Errorf("%s=%q after Main: stat says %v, want a file that does not exist", name, os.Getenv(name), err)
		}
	}
	if got := os.Getenv("AWS_EC2_METADATA_DISABLED"); got != "true" {
		t.Errorf("AWS_EC2_METADATA_DISABLED=%q after Main, want true", got)
	}
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatalf("LoadDefaultConfig: %v", err)
	}
	if cfg.Region != "us-east-1" {
		t.Errorf("region %q, want us-east-1", cfg.Region)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatalf("credentials: %v", err)
	}
	if creds.AccessKeyID != "ddbtest" || creds.SecretAccessKey != "ddbtest" || creds.SessionToken != "" {
		t.Errorf("credentials %q/%q with session token %q, want the dummy ddbtest/ddbtest and none", creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken)
	}
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
