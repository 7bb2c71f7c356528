// otelcol is the OpenTelemetry Collector the integration tests run: a
// minimal distribution built in code the way the Collector Builder's
// generated main.go and components.go build one, pinned by this module's
// go.mod. Every collector module is at one release: contrib v0.161.0, the
// newest file exporter that resolves with this machine's Go (1.26), and the
// core modules of that release, v0.161.0 and the stable v1.67.0.
//
// Components, and why each is in:
//   - receiver otlp (gRPC and HTTP): what the service's OTLP exporter sends to;
//   - exporter file (contrib): writes what was received as OTLP JSON lines,
//     which tests/common/private_otelcol.rs reads back;
//   - exporter debug: one log line per batch received, so a test that waited
//     in vain can show whether anything arrived at all.
//
// No batch processor: each request received is written as it comes, so a
// test waits only for the file exporter's flush.
//
// Built by scripts/otelcol.sh into .local/otelcol/otelcol; run as
//
//	otelcol --config FILE.yaml
package main

import (
	"os"
	"runtime/debug"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol",
			Description: "inventory-inbox's test collector: OTLP in, OTLP JSON lines out",
			Version:     version("go.opentelemetry.io/collector/otelcol"),
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					fileprovider.NewFactory(),
					envprovider.NewFactory(),
				},
			},
		},
		ProviderModules: map[string]string{
			scheme(fileprovider.NewFactory()): module("go.opentelemetry.io/collector/confmap/provider/fileprovider"),
			scheme(envprovider.NewFactory()):  module("go.opentelemetry.io/collector/confmap/provider/envprovider"),
		},
	}
	// cobra has already printed the error.
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		os.Exit(1)
	}
}

// components is the factories function: every component this distribution
// knows, and the module each comes from (shown by `otelcol components`).
func components() (otelcol.Factories, error) {
	var err error
	factories := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	factories.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](
		otlpreceiver.NewFactory(),
	)
	if err != nil {
		return otelcol.Factories{}, err
	}
	factories.ReceiverModules = map[component.Type]string{
		otlpreceiver.NewFactory().Type(): module("go.opentelemetry.io/collector/receiver/otlpreceiver"),
	}
	factories.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](
		fileexporter.NewFactory(),
		debugexporter.NewFactory(),
	)
	if err != nil {
		return otelcol.Factories{}, err
	}
	factories.ExporterModules = map[component.Type]string{
		fileexporter.NewFactory().Type():  module("github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"),
		debugexporter.NewFactory().Type(): module("go.opentelemetry.io/collector/exporter/debugexporter"),
	}
	return factories, nil
}

// module is "PATH VERSION" of a dependency, as `otelcol components` shows it.
func module(path string) string {
	return path + " " + version(path)
}

// version is a dependency's version as this binary was built with it
// (go.mod is the one place the versions are written).
func version(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == path {
				return dep.Version
			}
		}
	}
	return "(unknown)"
}

// scheme is the URI scheme a config provider serves ("file", "env").
func scheme(factory confmap.ProviderFactory) string {
	return factory.Create(confmap.ProviderSettings{}).Scheme()
}
